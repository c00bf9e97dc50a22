"""Attacks on 2025-11-25 tasks of ``retinue mcp serve`` (everything a client sends is
untrusted): a ``tasks/list`` cursor of Unicode digits is a clear -32602, not a crash; a task's
arguments are those the ``SubAgent`` tool offers, no more (its hidden options stay hidden);
ttl, task ids, cursors of every shape, two ``tasks/result`` at once and one cancelled while it
asks are bounded and leave the task valid; over HTTP a session belongs to the token that
opened it, so another token can neither hear its task notifications nor post into it."""

from __future__ import annotations

import asyncio
import json
import random
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
from mcp_types import INVALID_PARAMS
from test_mcp_cli import env_for
from test_mcp_serve_protocol import runtime_for
from test_mcp_tasks_2025 import answer, raw, workspace_in

from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.mcp.server.serve import build_server
from retinue.mcp.server.tasks import TaskBook
from retinue.mcp.server.tasks_2025 import BothTasks
from retinue.server.tokens import TokenBook
from retinue.testing import ScriptedModel

pytestmark = pytest.mark.timeout(300)  # a hang bound; servers start slowly under load


def call_with(arguments: dict[str, Any], task: object) -> dict[str, Any]:
    return {"name": "SubAgent", "arguments": arguments, "task": task}


async def code_of(client: Client, method: str, params: dict[str, Any]) -> int:
    with pytest.raises(MCPError) as refused:
        await raw(client, method, params)
    return refused.value.error.code


async def test_bad_ttls_ids_and_cursors_are_clear_errors_or_bounded(tmp_path: Path) -> None:
    server = build_server(runtime_for(tmp_path, ScriptedModel(responder=answer)))
    args = {"task": "sum", "role": "asker"}
    async with Client(server, mode="legacy") as client:
        ttls = []
        for ttl in (-5, 10**30, "100", None):
            created = await raw(client, "tools/call", call_with(args, {"ttl": ttl}))
            ttls.append(created["task"]["ttl"])
        bad_ttl = [await code_of(client, "tools/call", call_with(args, {"ttl": t}))
                   for t in (1.5, "abc", [], {})]  # fmt: skip
        bad_task = [await code_of(client, "tools/call", call_with(args, t)) for t in (5, "x", [])]
        ids: list[object] = ["x" * 10_000, 123, None, "", "0" * 32]
        methods = ("tasks/get", "tasks/result", "tasks/cancel")
        bad_ids = [await code_of(client, m, {"taskId": t}) for m in methods for t in ids]
        cursors = ["²", "١٢", "-1", "99999999", "", "1" * 50, " 1"]
        bad_cursors = [await code_of(client, "tasks/list", {"cursor": c}) for c in cursors]
        with pytest.raises(MCPError) as superscript:
            await raw(client, "tasks/list", {"cursor": "²"})
        listed = await raw(client, "tasks/list", {"cursor": "1"})
    assert ttls == [60_000, 3_600_000, 60_000, 3_600_000]  # within a minute and an hour
    assert set(bad_ttl) == set(bad_task) == set(bad_ids) == {INVALID_PARAMS}
    assert bad_cursors == [INVALID_PARAMS] * len(cursors)  # (a Unicode digit crashed int())
    assert "invalid literal" not in superscript.value.error.message
    assert len(listed["tasks"]) == 3 and "nextCursor" not in listed


async def test_a_task_takes_only_the_arguments_the_subagent_tool_offers(tmp_path: Path) -> None:
    """``background``, ``steer`` and ``fork`` are options of Retinue's own SubAgent tool that
    ``mcp serve`` does not offer (its tool takes task, role, interactive, instance): a task's
    arguments reached the tool whole, so a client could send them; they are left out now, as
    a plain call leaves them out."""
    model = ScriptedModel(responder=answer)
    server = build_server(runtime_for(tmp_path, model))
    hidden = {"task": "sum", "role": "asker", "interactive": True, "background": True,
              "steer": True, "fork": True}  # fmt: skip
    async with Client(server, mode="legacy") as client:
        created = await raw(client, "tools/call", {"name": "SubAgent", "arguments": hidden,
                                                   "task": {}})  # fmt: skip
        result = await raw(client, "tasks/result", {"taskId": created["task"]["taskId"]})
        plain = await client.call_tool("SubAgent", hidden)
    assert not result.get("isError"), result
    assert result["content"][0]["text"].startswith("the sum is 5")  # not sent to the background
    assert not plain.is_error and "the sum is 5" in str(plain.content[0])


async def test_two_results_at_once_and_one_cancelled_while_it_asks(tmp_path: Path) -> None:
    """A ``tasks/result`` cancelled while its elicitation is unanswered leaves the task
    ``input_required``; two more at once: the newer asks (the older gives way), both get
    the same result, and the answer goes on in the same turn, once; an answer of the wrong
    type is declined (the question's note comes back)."""
    model = ScriptedModel(responder=answer)
    server = build_server(runtime_for(tmp_path, model))
    asked: list[str] = []
    hang = asyncio.Event()

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        del context
        asked.append(params.message)
        if len(asked) == 1:
            await hang.wait()  # never answered: its tasks/result is cancelled
        if "asker#2" in params.message:  # (the second task's session)
            return types.ElicitResult(action="accept", content={"answer": 123})
        return types.ElicitResult(action="accept", content={"answer": "teal"})

    call = {"name": "SubAgent", "arguments": {"task": "paint", "role": "asker"}, "task": {}}
    async with Client(server, mode="legacy", elicitation_callback=elicit) as client:
        tid = (await raw(client, "tools/call", call))["task"]["taskId"]
        first = asyncio.create_task(raw(client, "tasks/result", {"taskId": tid}))
        for _ in range(3000):  # a hang bound, polled
            if asked:
                break
            await asyncio.sleep(0.02)
        first.cancel()
        await asyncio.gather(first, return_exceptions=True)
        still = await raw(client, "tasks/get", {"taskId": tid})
        one, two = await asyncio.gather(raw(client, "tasks/result", {"taskId": tid}),
                                        raw(client, "tasks/result", {"taskId": tid}))  # fmt: skip
        wrong = (await raw(client, "tools/call", call))["task"]["taskId"]
        declined = await raw(client, "tasks/result", {"taskId": wrong})
        hang.set()
    assert still["status"] == "input_required"
    assert one == two and "painted it" in one["content"][0]["text"]
    teal = [c for c in model.calls if c.messages[-1].content == "teal"]
    assert len(teal) == 1  # one answer, to the same turn
    assert sum("asker#2" in a for a in asked) == 1
    assert "asks: Which colour?]" in declined["content"][0]["text"]


def headers(token: str, session: str | None = None) -> dict[str, str]:
    found = {"Authorization": f"Bearer {token}", "MCP-Protocol-Version": "2025-11-25",
             "Accept": "application/json, text/event-stream"}  # fmt: skip
    return found | ({"mcp-session-id": session} if session else {})


async def hear(client: httpx.AsyncClient, url: str, token: str, session: str,
               heard: list[Any]) -> None:  # fmt: skip
    """Open the session's GET stream as ``token``: its status, then each message on it."""
    async with client.stream("GET", url, headers=headers(token, session)) as stream:
        heard.append(stream.status_code)
        async for line in stream.aiter_lines():
            if line.startswith("data:") and line[5:].strip():
                heard.append(json.loads(line[5:]))


async def test_over_http_a_session_is_its_tokens_alone(tmp_path: Path) -> None:
    """Bob, who learned Alice's session id (the server logs it), sends it with his own token:
    he could open its GET stream and hear her task's status and progress notifications, and
    post into it (a response to the elicitation her tasks/result waits on). The session is
    Alice's alone now: to Bob it does not exist (404), as the SDK answers an unknown one."""
    workspace = workspace_in(tmp_path)
    tokens = TokenBook(tmp_path / "home")
    alice, bob = tokens.issue("alice"), tokens.issue("bob")
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "alice", "version": "1"}}}  # fmt: skip
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "SubAgent", "arguments": {"task": "sum", "role": "helper"}, "task": {},
        "_meta": {"progressToken": "p"}}}  # fmt: skip
    with LoopbackOpenAIServer(ScriptedModel(responder=answer)) as llm:
        cmd = [sys.executable, "-m", "retinue", "mcp", "serve", "--http", "--port", str(port),
               "--model", "openai:test"]  # fmt: skip
        pipe = asyncio.subprocess.PIPE
        proc = await asyncio.create_subprocess_exec(*cmd, env=env_for(tmp_path, llm),
                                                    cwd=workspace, stderr=pipe)  # fmt: skip
        try:
            async with httpx.AsyncClient(timeout=30) as http:
                for _ in range(1200):  # 120 s for the server to start (polled)
                    try:
                        await http.post(url, json={})
                        break
                    except httpx.TransportError:
                        await asyncio.sleep(0.1)
                opened = await http.post(url, json=init, headers=headers(alice))
                session = opened.headers["mcp-session-id"]
                note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
                await http.post(url, json=note, headers=headers(alice, session))
                by_bob: list[Any] = []
                by_alice: list[Any] = []
                listening = []
                for who, heard in ((bob, by_bob), (alice, by_alice)):  # (one GET stream each)
                    listening.append(asyncio.create_task(hear(http, url, who, session, heard)))
                    await asyncio.sleep(0.3)
                created = await http.post(url, json=call, headers=headers(alice, session))
                lists = {"jsonrpc": "2.0", "id": 3, "method": "tasks/list", "params": {}}
                posted = await http.post(url, json=lists, headers=headers(bob, session))
                for _ in range(600):  # a hang bound, polled
                    if any("tasks/status" in str(m) for m in by_alice):
                        break
                    await asyncio.sleep(0.1)
                for job in listening:
                    job.cancel()
                await asyncio.gather(*listening, return_exceptions=True)
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert created.status_code == 200 and '"task"' in created.text
    assert by_bob == [404] and posted.status_code == 404  # nothing of Alice's reached Bob
    assert by_alice[0] == 200
    statuses = [m["params"]["status"] for m in by_alice[1:]
                if m.get("method") == "notifications/tasks/status"]  # fmt: skip
    assert statuses == ["completed"]  # Alice still hears her own task
    assert "Traceback" not in err.decode()


def job_server(book: TaskBook) -> MCPServer[Any]:
    """A server whose one tool ``Job`` runs as a 2025-11-25 task from ``book``."""
    tasks = BothTasks(book, {"Job"}, lambda _ctx: None)
    server: MCPServer[Any] = MCPServer("t", extensions=[tasks], middleware=[tasks.middleware])

    @server.tool(name="Job")
    def job() -> str:
        return "plain"

    del job  # registered on the server
    return server


async def test_a_tasks_progress_carries_its_related_task(tmp_path: Path) -> None:
    """2025-11-25: every notification associated with a task carries the related-task
    metadata (only tasks/get, tasks/list, tasks/cancel and the status notification, which
    hold the task id already, need not): its progress did not."""

    async def work(_who: Any, _args: Any, _ask: Any, report: Any) -> types.CallToolResult:
        await report("one", "first")
        return types.CallToolResult(content=[types.TextContent(text="done")])

    heard: list[types.ProgressNotificationParams] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ProgressNotification):
            heard.append(message.params)

    server = job_server(TaskBook(work))
    async with Client(server, mode="legacy", message_handler=on_message) as client:
        call = {"name": "Job", "task": {}, "_meta": {"progressToken": "t1"}}
        tid = (await raw(client, "tools/call", call))["task"]["taskId"]
        await raw(client, "tasks/result", {"taskId": tid})
        for _ in range(3000):  # the notification reaches the handler (a hang bound, polled)
            if heard:
                break
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.1)  # and any other, which would be one too many
    [progress] = heard
    assert progress.message == "first"
    assert progress.meta == {"io.modelcontextprotocol/related-task": {"taskId": tid}}


async def test_what_tasks_get_finds_tasks_list_lists() -> None:
    """A task past its ttl was left out of tasks/list but still read by tasks/get, result
    and cancel until the next task was made; the spec: a task tasks/get finds, tasks/list
    lists. Both find it now (its result stays readable), until a new task lets it go."""

    async def work(_who: Any, _args: Any, _ask: Any, _report: Any) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(text="done")])

    book = TaskBook(work)
    async with Client(job_server(book), mode="legacy") as client:
        run = book.start(None, {}, ttl_ms=1)  # (a client's ttl is raised to a minute)
        assert run.job is not None
        await asyncio.wait_for(run.job, 60)
        await asyncio.sleep(0.01)
        listed = await raw(client, "tasks/list", {})
        found = await raw(client, "tasks/get", {"taskId": run.id})
        result = await raw(client, "tasks/result", {"taskId": run.id})
        await raw(client, "tools/call", {"name": "Job", "task": {}})  # (a new task)
        gone = await code_of(client, "tasks/get", {"taskId": run.id})
        after = await raw(client, "tasks/list", {})
    assert run.expired()
    assert [t["taskId"] for t in listed["tasks"]] == [found["taskId"]] == [run.id]
    assert result["content"][0]["text"] == "done"
    assert gone == INVALID_PARAMS and run.id not in str(after)


def data_of(line: str) -> dict[str, Any] | None:
    return json.loads(line[5:]) if line.startswith("data:") and line[5:].strip() else None


async def test_over_http_a_tasks_result_whose_stream_drops_leaves_the_turn_askable(
    tmp_path: Path,
) -> None:
    """A client's tasks/result stream drops once the question's elicitation is on it (HTTP
    does not cancel the request: its handler waited on for an answer that could not come).
    The next tasks/result was never asked: the turn waited for its TTL, an hour. The newest
    tasks/result asks now: the same question comes on its stream, the answer goes on."""
    workspace = workspace_in(tmp_path)
    alice = TokenBook(tmp_path / "home").issue("alice")
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "alice", "version": "1"}}}  # fmt: skip
    paint = {"task": "paint", "role": "asker"}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "SubAgent", "arguments": paint, "task": {}}}  # fmt: skip
    with LoopbackOpenAIServer(ScriptedModel(responder=answer)) as llm:
        cmd = [sys.executable, "-m", "retinue", "mcp", "serve", "--http", "--port", str(port),
               "--model", "openai:test"]  # fmt: skip
        pipe = asyncio.subprocess.PIPE
        proc = await asyncio.create_subprocess_exec(*cmd, env=env_for(tmp_path, llm),
                                                    cwd=workspace, stderr=pipe)  # fmt: skip
        try:
            async with httpx.AsyncClient(timeout=30) as http:
                for _ in range(1200):  # 120 s for the server to start (polled)
                    try:
                        await http.post(url, json={})
                        break
                    except httpx.TransportError:
                        await asyncio.sleep(0.1)
                opened = await http.post(url, json=init, headers=headers(alice))
                session = opened.headers["mcp-session-id"]
                note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
                await http.post(url, json=note, headers=headers(alice, session))
                created = await http.post(url, json=call, headers=headers(alice, session))
                [reply] = [m for m in map(data_of, created.text.splitlines()) if m]
                tid = reply["result"]["task"]["taskId"]
            first: list[dict[str, Any]] = []
            result = {"jsonrpc": "2.0", "id": 3, "method": "tasks/result",
                      "params": {"taskId": tid}}  # fmt: skip
            async with (
                httpx.AsyncClient(timeout=30) as dropped,  # its connection is closed
                dropped.stream("POST", url, json=result, headers=headers(alice, session)) as stream,
            ):
                async for line in stream.aiter_lines():
                    if (message := data_of(line)) is not None:
                        first.append(message)
                        break
            second: list[dict[str, Any]] = []
            async with asyncio.timeout(30), httpx.AsyncClient(timeout=30) as http:
                again = {**result, "id": 4}
                async with http.stream("POST", url, json=again,
                                       headers=headers(alice, session)) as stream:  # fmt: skip
                    async for line in stream.aiter_lines():
                        if (message := data_of(line)) is None:
                            continue
                        second.append(message)
                        if message.get("method") == "elicitation/create":
                            teal = {"action": "accept", "content": {"answer": "teal"}}
                            response = {"jsonrpc": "2.0", "id": message["id"], "result": teal}
                            await http.post(url, json=response, headers=headers(alice, session))
                        elif message.get("id") == 4:
                            break
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert [m.get("method") for m in first] == ["elicitation/create"]
    asked, final = second[0], second[-1]
    assert asked.get("method") == "elicitation/create" and "Which colour?" in str(asked)
    assert "painted it" in final["result"]["content"][0]["text"]  # the same turn went on
    assert "Traceback" not in err.decode()


SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}}
QUESTION = {"method": "elicitation/create",
            "params": {"mode": "form", "message": "Which?", "requestedSchema": SCHEMA}}  # fmt: skip


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_results_cancelled_at_random_leave_every_task_answerable(seed: int) -> None:
    """Tasks that each ask two questions; tasks/result calls made and cancelled at random
    moments, answers slow or declined at random (fixed seeds). Then one tasks/result per
    task: each ends completed with two answers, none hangs, and nothing is left asking."""
    rng = random.Random(seed)

    async def work(_who: Any, _args: Any, ask: Any, _report: Any) -> types.CallToolResult:
        got = [(await ask({"answer": QUESTION})).get("answer", {}).get("action") for _ in "ab"]
        return types.CallToolResult(content=[types.TextContent(text=" ".join(map(str, got)))])

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        del context, params
        await asyncio.sleep(rng.random() * 0.05)
        if rng.random() < 0.2:
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content={"answer": "x"})

    tasks = BothTasks(TaskBook(work), {"Job"}, lambda _ctx: None)
    server: MCPServer[Any] = MCPServer("t", extensions=[tasks], middleware=[tasks.middleware])
    server.tool(name="Job")(lambda: "plain")
    async with Client(server, mode="legacy", elicitation_callback=elicit) as client:
        ids = [(await raw(client, "tools/call", {"name": "Job", "task": {}}))["task"]["taskId"]
               for _ in range(3)]  # fmt: skip
        calls: list[asyncio.Task[dict[str, Any]]] = []
        for _ in range(12):
            tid = rng.choice(ids)
            calls.append(asyncio.create_task(raw(client, "tasks/result", {"taskId": tid})))
            await asyncio.sleep(rng.random() * 0.04)
            if rng.random() < 0.6:
                rng.choice(calls).cancel()
        async with asyncio.timeout(30):
            results = [await raw(client, "tasks/result", {"taskId": t}) for t in ids]
            await asyncio.gather(*calls, return_exceptions=True)
    assert all(len(r["content"][0]["text"].split()) == 2 for r in results)
    assert tasks._asker == {}  # pyright: ignore[reportPrivateUsage]
