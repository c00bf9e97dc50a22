"""MCP Tasks at protocol 2025-11-25 (the core spec's experimental tasks) on ``retinue mcp
serve``, driven by the TypeScript SDK's client (@modelcontextprotocol/sdk 1.32.2 and its
``client.experimental.tasks``, an implementation this project did not write): a
task-augmented ``SubAgent`` one-shot runs to its result through ``tasks/result``, with its
progress and status notifications; a sub-agent's question is asked by elicitation (related to
the task) within ``tasks/result`` and the answer continues the same turn; ``tasks/cancel``
interrupts the sub-agent's turn; over HTTP another token can neither get nor cancel the task;
a call without a task gets its plain result. The Python SDK's client does not make 2025-11-25
task-augmented calls (it reads the ``CreateTaskResult`` as a malformed tool result, and drops
``notifications/tasks/status``), so the in-process tests below send those requests raw
through its dispatcher. The node tests skip without node or ``tests/mcp_both/ts/node_modules``
(``.ci/run`` installs it)."""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from bearer_proxy import free_port
from mcp import Client, types
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp_kit import painter, role
from mcp_types import INVALID_PARAMS, METHOD_NOT_FOUND
from test_mcp_cli import env_for
from test_mcp_serve_protocol import asking_model, runtime_for

from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.mcp.server.serve import build_server
from retinue.mcp.server.tasks import TaskBook
from retinue.mcp.server.tasks_2025 import PROGRESS_BURST, PROGRESS_CHARS, BothTasks
from retinue.server.tokens import TokenBook
from retinue.testing import ScriptedModel

TS = Path(__file__).with_name("ts")
pytestmark = pytest.mark.timeout(300)  # a hang bound; servers start slowly under load
needs_node = pytest.mark.skipif(
    shutil.which("node") is None or not (TS / "node_modules" / "@modelcontextprotocol").is_dir(),
    reason="needs node and tests/mcp_both/ts/node_modules (cd tests/mcp_both/ts && npm ci)",
)


answer = painter  # (mcp_kit: sum, paint/teal, hold, memorize)


def workspace_in(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    role(workspace, "helper", "capabilities: []", "You help.")
    role(workspace, "asker", "capabilities: [ask_parent]", "You ask when unsure.")
    role(workspace, "holder", "capabilities: [ask_parent]", "You ask when unsure.")
    return workspace


async def node(*args: str, cwd: Path, env: dict[str, str]) -> dict[str, Any]:
    """Run tasks.mjs: what it saw."""
    pipe = asyncio.subprocess.PIPE
    proc = await asyncio.create_subprocess_exec("node", str(TS / "tasks.mjs"), *args, cwd=cwd,
                                                env=env, stdout=pipe, stderr=pipe)  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 100)
    assert proc.returncode == 0, err.decode()[-3000:]
    assert "Traceback" not in err.decode()
    return json.loads(out.decode().strip().splitlines()[-1])


@needs_node
async def test_the_typescript_client_runs_subagent_calls_as_2025_11_25_tasks(
    tmp_path: Path,
) -> None:
    workspace = workspace_in(tmp_path)
    model = ScriptedModel(responder=answer)
    with LoopbackOpenAIServer(model) as llm:
        seen = await node("stdio", sys.executable, str(workspace), cwd=TS,
                          env=env_for(tmp_path, llm))  # fmt: skip
    assert seen["capability"] == {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
    assert seen["execution"]["SubAgent"] == {"taskSupport": "optional"}
    assert seen["execution"]["UnloadSubAgent"] is None  # (forbidden: not offered as a task)
    # a one-shot, as a task the SDK polled and then read with tasks/result
    one = seen["oneShot"]
    assert one["types"][0] == "taskCreated" and one["types"][-1] == "result", one
    assert one["result"]["text"] == "the sum is 5" and one["result"]["isError"] is False
    assert one["result"]["related"]["io.modelcontextprotocol/related-task"] == {
        "taskId": one["taskId"]
    }
    assert "run_started" in seen["progress"] and "run_finished" in seen["progress"]
    # a question: the task went input_required, the SDK called tasks/result, which asked by
    # elicitation related to the task; the answer continued the same turn to its reply
    painted = seen["painted"]
    assert "status:input_required" in painted["types"], painted
    assert painted["result"]["isError"] is False and "painted it" in painted["result"]["text"]
    [asked] = [a for a in seen["asked"] if "Which colour?" in a["message"]]
    assert asked["related"] == {"taskId": painted["taskId"]}
    teal = [c for c in model.calls if c.messages[-1].content == "teal"]
    assert len(teal) == 1 and any("AskParent" in str(m) for m in teal[0].messages[:-1])
    # status notifications heard: each change of each task
    of = {t: [s["status"] for s in seen["statuses"] if s["taskId"] == t]
          for t in (one["taskId"], painted["taskId"])}  # fmt: skip
    assert of[one["taskId"]] == ["completed"]
    assert of[painted["taskId"]] == ["input_required", "working", "completed"]
    # without a task param, the plain result; tasks/list lists this client's tasks only
    assert seen["plain"] == {"isError": False, "text": "the sum is 5", "task": None}
    assert seen["listed"] == ["completed", "completed"] and seen["listedAfterPlain"] == 2
    # cancelled while its sub-agent waited for an answer: the turn is interrupted
    cancel = seen["cancel"]
    assert cancel["before"] == "input_required"
    assert cancel["returned"] == "cancelled" and cancel["after"] == "cancelled"
    assert cancel["again"] == INVALID_PARAMS  # an ended task cannot be cancelled
    assert cancel["result"] == INVALID_PARAMS and cancel["unknown"] == INVALID_PARAMS
    assert ": idle" in cancel["session"] and "interrupted" in cancel["session"], cancel
    assert not [a for a in seen["asked"] if "Hold on?" in a["message"]]  # never asked


@needs_node
async def test_over_http_another_token_cannot_see_or_cancel_the_task(tmp_path: Path) -> None:
    workspace = workspace_in(tmp_path)
    tokens = TokenBook(tmp_path / "home")
    alice, bob = tokens.issue("alice"), tokens.issue("bob")
    model = ScriptedModel(responder=answer)
    port = free_port()
    with LoopbackOpenAIServer(model) as llm:
        env = env_for(tmp_path, llm)
        cmd = [sys.executable, "-m", "retinue", "mcp", "serve", "--http", "--port", str(port),
               "--model", "openai:test"]  # fmt: skip
        proc = await asyncio.create_subprocess_exec(*cmd, env=env, cwd=workspace)
        try:
            url = f"http://127.0.0.1:{port}/mcp"
            async with httpx.AsyncClient() as plain:
                for _ in range(1200):  # 120 s for the server to start (polled)
                    try:
                        await plain.post(url, json={})
                        break
                    except httpx.TransportError:
                        await asyncio.sleep(0.1)
            seen = await node("http", url, alice, bob, cwd=TS, env=env)
        finally:
            proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(proc.wait(), 30)
    assert seen["before"] == "input_required"
    # to bob, alice's task does not exist
    assert seen["bob"] == {"get": INVALID_PARAMS, "cancel": INVALID_PARAMS,
                           "result": INVALID_PARAMS, "listed": 0}  # fmt: skip
    assert seen["alice"] == {"still": "input_required", "listed": [True],
                             "cancelled": "cancelled"}  # fmt: skip
    # over HTTP too, the question is asked within tasks/result's stream and answered
    assert "painted it" in seen["painted"]["result"]["text"]
    [asked] = [a["message"] for a in seen["asked"]]
    assert asked.startswith("[session mcp-client-alice/asker#") and "Which colour?" in asked


async def raw(client: Client, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """A request as JSON-RPC, through the SDK client's own dispatcher (its typed methods do
    not speak 2025-11-25's tasks)."""
    dispatcher = getattr(client.session, "_dispatcher")  # noqa: B009
    return await dispatcher.send_raw_request(method, params, None)


async def test_without_elicitation_the_question_comes_back_in_the_result(
    tmp_path: Path,
) -> None:
    model = asking_model()
    server = build_server(runtime_for(tmp_path, model))
    async with Client(server, mode="legacy") as client:  # (it declares no elicitation)
        args = {"task": "paint", "role": "asker"}
        call = {"name": "SubAgent", "arguments": args, "task": {"ttl": 5}}
        created = await raw(client, "tools/call", call)
        task = created["task"]
        assert task["status"] == "working" and task["ttl"] == 60_000  # (raised to a minute)
        result = await raw(client, "tasks/result", {"taskId": task["taskId"]})
    assert "[session mcp-client/asker#1 asks: Which colour?]" in result["content"][0]["text"]
    assert "resultType" not in result  # (a 2026-07-28 field)
    assert len(model.calls) == 1  # not answered: the question waits for a later SubAgent


async def test_a_retinue_error_is_a_failed_task_and_other_tools_are_no_tasks(
    tmp_path: Path,
) -> None:
    server = build_server(runtime_for(tmp_path, asking_model()))
    async with Client(server, mode="legacy") as client:
        call = {"name": "SubAgent", "task": {}, "arguments": {"task": "x", "role": "nobody"}}
        created = await raw(client, "tools/call", call)
        tid = created["task"]["taskId"]
        result = await raw(client, "tasks/result", {"taskId": tid})
        task = await raw(client, "tasks/get", {"taskId": tid})
        with pytest.raises(MCPError) as refused:
            await raw(client, "tools/call", {"name": "UnloadSubAgent", "task": {},
                                             "arguments": {"role": "asker"}})  # fmt: skip
        with pytest.raises(MCPError) as bad_cursor:
            await raw(client, "tasks/list", {"cursor": "zz"})
    assert result["isError"] is True and "nobody" in result["content"][0]["text"]
    assert task["status"] == "failed" and "nobody" in task["statusMessage"]  # (2025-11-25)
    assert refused.value.error.code == METHOD_NOT_FOUND
    assert bad_cursor.value.error.code == INVALID_PARAMS


async def test_at_2026_07_28_nothing_of_2025_11_25_tasks_is_offered(tmp_path: Path) -> None:
    server = build_server(runtime_for(tmp_path, asking_model()))
    async with Client(server, mode="2026-07-28") as client:
        tools = await client.list_tools()
        assert all(t.execution is None for t in tools.tools)
        with pytest.raises(MCPError) as missing:
            await raw(client, "tasks/result", {"taskId": "x"})
    assert missing.value.error.code == METHOD_NOT_FOUND
    async with Client(server, mode="legacy") as client:
        assert client.session.server_capabilities is not None
        assert client.session.server_capabilities.tasks is not None


async def test_progress_of_a_task_is_bounded_in_rate_and_size() -> None:
    """A work that reports 100 times at once, one of them huge: the client hears a burst of
    ``PROGRESS_BURST``, each message within ``PROGRESS_CHARS``; the task's statusMessage is
    the latest summary while it works."""
    go = asyncio.Event()

    async def work(_who: Any, _args: Any, _ask: Any, report: Any) -> types.CallToolResult:
        await report("big", "x" * 10 * PROGRESS_CHARS)
        for n in range(99):
            await report(f"step {n}", json.dumps({"n": n}))
        await go.wait()
        return types.CallToolResult(content=[types.TextContent(text="done")])

    tasks = BothTasks(TaskBook(work), {"Job"}, lambda _ctx: None)
    server: MCPServer[Any] = MCPServer("t", extensions=[tasks], middleware=[tasks.middleware])

    @server.tool(name="Job")
    def job() -> str:
        return "plain"

    heard: list[types.ProgressNotificationParams] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ProgressNotification):
            heard.append(message.params)

    async with Client(server, mode="legacy", message_handler=on_message) as client:
        call = {"name": "Job", "task": {}, "_meta": {"progressToken": "t1"}}
        created = await raw(client, "tools/call", call)
        tid = created["task"]["taskId"]
        task: dict[str, Any] = {}
        for _ in range(3000):  # a hang bound: polled
            task = await raw(client, "tasks/get", {"taskId": tid})
            if task.get("statusMessage") == "step 98":
                break
            await asyncio.sleep(0.02)
        go.set()
        result = await raw(client, "tasks/result", {"taskId": tid})
        for _ in range(3000):  # the notifications reach the handler (a hang bound, polled)
            if len(heard) >= PROGRESS_BURST:
                break
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.1)  # and any more than that, which would be too many
    assert task["statusMessage"] == "step 98"
    assert result["content"][0]["text"] == "done"
    assert PROGRESS_BURST <= len(heard) <= PROGRESS_BURST + 2  # the rest were left out
    assert all(p.progress_token == "t1" and len(p.message or "") <= PROGRESS_CHARS for p in heard)
    assert [p.progress for p in heard] == sorted({p.progress for p in heard})  # increasing
