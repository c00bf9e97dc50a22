"""MCP Tasks (2026-07-28's ``io.modelcontextprotocol/tasks``) on ``retinue mcp serve``,
driven by the Python SDK's client: a ``SubAgent`` call from a client that declares Tasks
is a task the client polls, whose sub-agent question it answers with ``tasks/update``
(the same turn goes on), and whose cancel interrupts the sub-agent's turn; a client that
does not declare Tasks gets what it always got. (The TypeScript SDK 1.32.2 speaks
2025-11-25 only, without this extension.)"""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from bearer_proxy import free_port
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError
from mcp_kit import role
from mcp_types import INVALID_PARAMS, MISSING_REQUIRED_CLIENT_CAPABILITY
from test_mcp_cli import env_for
from test_mcp_serve_protocol import answer_of, asking_model, runtime_for, text

from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.mcp.server.serve import build_server
from retinue.mcp.server.tasks import TaskBook
from retinue.mcp.tasks import (
    Ack,
    CreateTaskResult,
    DetailedTask,
    TaskCancel,
    TaskGet,
    TaskParams,
    TasksClient,
)
from retinue.server.tokens import Principal
from retinue.testing import ScriptedModel, call_tool

pytestmark = pytest.mark.timeout(300)  # a hang bound; servers start slowly under load


async def until(condition: Any) -> None:
    for _ in range(3000):  # a hang bound (60 s and more): polled
        if condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition never held")


async def test_a_subagent_call_is_a_task_whose_question_is_answered_by_tasks_update(
    tmp_path: Path,
) -> None:
    asked: list[dict[str, Any]] = []

    async def answer(requests: dict[str, Any]) -> dict[str, Any]:
        asked.append(requests)
        return {key: {"action": "accept", "content": {"answer": "teal"}} for key in requests}

    model = asking_model()
    server = build_server(runtime_for(tmp_path, model))
    async with Client(server, mode="2026-07-28", extensions=[TasksClient(answer)]) as client:
        result = await client.call_tool("SubAgent", {"task": "paint", "role": "asker"})
    assert not result.is_error, text(result)
    assert "painted it in the colour given" in text(result)
    [requests] = asked  # the question came as the task's input request, not within a call
    [request] = requests.values()
    assert request["method"] == "elicitation/create"
    assert "Which colour?" in request["params"]["message"]
    assert answer_of(model) == "teal"
    assert len(model.calls) == 2  # one turn: the answer continued it


async def test_the_task_is_polled_and_a_retinue_error_is_a_completed_task_in_error(
    tmp_path: Path,
) -> None:
    server = build_server(runtime_for(tmp_path, asking_model()))
    async with Client(server, mode="2026-07-28", extensions=[TasksClient()]) as client:
        await client.list_tools()
        args = {"task": "x", "role": "nobody"}
        created = await client.session.call_tool("SubAgent", args, allow_claimed=True)
        assert isinstance(created, CreateTaskResult)
        assert created.status == "working" and created.model_extra is not None
        assert {"createdAt", "lastUpdatedAt", "ttlMs"} <= set(created.model_extra)
        params = TaskParams(task_id=created.task_id)
        task = await client.session.send_request(TaskGet(params=params), DetailedTask)
        for _ in range(3000):  # polled until it ends (a hang bound)
            if task.status != "working":
                break
            await asyncio.sleep(0.02)
            task = await client.session.send_request(TaskGet(params=params), DetailedTask)
        assert task.status == "completed" and task.result is not None
        assert task.result["isError"] is True
        assert "nobody" in task.result["content"][0]["text"]
        with pytest.raises(MCPError) as unknown:
            await client.session.send_request(TaskGet(params=TaskParams(task_id="nope")), Ack)
        assert unknown.value.error.code == INVALID_PARAMS


async def test_cancelling_the_task_interrupts_the_subagents_turn(tmp_path: Path) -> None:
    model = ScriptedModel(["slow reply", "second reply"], name="scripted:asker", delay=30)
    runtime = runtime_for(tmp_path, model)
    server = build_server(runtime)
    async with Client(server, mode="2026-07-28", extensions=[TasksClient()]) as client:
        args = {"task": "take your time", "role": "asker", "interactive": True}
        await client.list_tools()
        created = await client.session.call_tool("SubAgent", args, allow_claimed=True)
        assert isinstance(created, CreateTaskResult)
        await until(lambda: model.call_count == 1)  # the sub-agent's turn is running
        [held] = runtime.manager.registry.held_by("mcp-client")
        assert held.session.state == "running"
        params = TaskParams(task_id=created.task_id)
        await client.session.send_request(TaskCancel(params=params), Ack)
        task = await client.session.send_request(TaskGet(params=params), DetailedTask)
        assert task.status == "cancelled" and task.result is None
        assert held.session.state == "idle"  # interrupted; the session stays, valid
        model.delay = 0
        again = await client.call_tool("SubAgent", {**args, "task": "now quickly"})
    assert "second reply" in text(again)


async def test_without_declaring_tasks_a_call_runs_as_before(tmp_path: Path) -> None:
    model = ScriptedModel(["done at once"], name="scripted:asker")
    server = build_server(runtime_for(tmp_path, model))
    async with Client(server, mode="2026-07-28") as client:
        result = await client.call_tool("SubAgent", {"task": "go", "role": "asker"})
        assert "done at once" in text(result)  # a result, not a task
        with pytest.raises(MCPError) as refused:
            await client.session.send_request(TaskGet(params=TaskParams(task_id="x")), Ack)
        assert refused.value.error.code == MISSING_REQUIRED_CLIENT_CAPABILITY


async def test_a_tokens_tasks_are_its_own_and_a_crash_is_a_failed_task() -> None:
    async def work(_who: Any, arguments: dict[str, Any], *_: Any) -> Any:
        raise RuntimeError(arguments["boom"])

    book = TaskBook(work)
    alice, bob = Principal(name="alice", tenant="alice"), Principal(name="bob", tenant="bob")
    run = book.start(alice, {"boom": "secret detail"})
    assert book.of(alice, run.id) is run
    with pytest.raises(MCPError) as unknown:
        book.of(bob, run.id)
    assert unknown.value.error.code == INVALID_PARAMS
    assert run.job is not None
    await run.job
    shown = book.of(alice, run.id).detailed()
    assert shown["status"] == "failed" and "result" not in shown
    assert "secret detail" not in str(shown["error"])  # the exception's text stays inside
    assert "internal error (" in shown["error"]["message"]  # but says what kind, and where


async def test_over_http_the_task_runs_behind_the_token_and_its_question_is_answered(
    tmp_path: Path,
) -> None:
    """``retinue mcp serve --http``, a real process: the task outlives the request that made
    it (stateless HTTP), and its question comes back through ``tasks/get``."""
    workspace = tmp_path / "ws"
    role(workspace, "asker", "capabilities: [ask_parent]", "You ask when unsure.")
    model = ScriptedModel([call_tool("AskParent", {"question": "Which colour?"}), "painted it"])
    asked: list[str] = []

    async def answer(requests: dict[str, Any]) -> dict[str, Any]:
        asked.extend(r["params"]["message"] for r in requests.values())
        return {key: {"action": "accept", "content": {"answer": "teal"}} for key in requests}

    port = free_port()
    with LoopbackOpenAIServer(model) as llm:
        cmd = [sys.executable, "-m", "retinue", "mcp", "serve", "--http", "--port", str(port),
               "--model", "openai:test"]  # fmt: skip
        proc = await asyncio.create_subprocess_exec(*cmd, env=env_for(tmp_path, llm),
                                                    cwd=workspace)  # fmt: skip
        try:
            url = f"http://127.0.0.1:{port}/mcp"
            async with httpx.AsyncClient() as plain:
                for _ in range(1200):  # 120 s for the server to start (polled)
                    try:
                        await plain.post(url, json={})
                        break
                    except httpx.TransportError:
                        await asyncio.sleep(0.1)
            token = (tmp_path / "home" / "server-token").read_text().strip()
            http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
            transport = streamable_http_client(url, http_client=http)
            async with Client(transport, extensions=[TasksClient(answer)]) as client:
                assert client.protocol_version == "2026-07-28"
                result = await client.call_tool("SubAgent", {"task": "paint", "role": "asker"})
        finally:
            proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(proc.wait(), 30)
    assert not result.is_error and "painted it" in text(result)
    assert len(asked) == 1 and "Which colour?" in asked[0]
    assert model.calls[1].messages[-1].content == "teal"  # the same turn went on


@pytest.mark.parametrize("allow", [True, False])
async def test_a_subagents_call_to_approve_is_asked_in_the_task(
    tmp_path: Path, allow: bool
) -> None:
    """An approval is asked as the task's input request (at 2026-07-28 a call cannot ask
    mid-way; a task can): yes lets the call run, no is a refusal the sub-agent reads."""
    from test_mcp_approvals import runtime_for as approving_runtime
    from test_mcp_approvals import scribe_model

    asked: list[str] = []

    async def answer(requests: dict[str, Any]) -> dict[str, Any]:
        asked.extend(r["params"]["message"] for r in requests.values())
        form = {"allow": allow, "always": False, "reason": "" if allow else "not today"}
        return {key: {"action": "accept", "content": form} for key in requests}

    scribe = scribe_model()
    server = build_server(approving_runtime(tmp_path, scribe))
    async with Client(server, mode="2026-07-28", extensions=[TasksClient(answer)]) as client:
        result = await client.call_tool("SubAgent", {"task": "write a note", "role": "scribe"})
    assert "finished" in text(result)
    [message] = asked
    assert "Write" in message and "note.txt" in message
    assert (tmp_path / "note.txt").exists() == allow
    if not allow:
        assert "not today" in scribe.calls[-1].messages[-1].content
