"""Cancelling a turn on Temporal (``cancel_turn``): its calls in flight are cancelled on
their worker, those that finished keep their results, the others are answered "cancelled",
a session's turn run for it ends too, and the conversation takes the next message. From the
client and from the front end's ``interrupt`` route. Against a real dev server and
in-process workers."""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

import httpx
import pytest

pytest.importorskip("temporalio", reason="the temporal extra (temporalio) is not installed")

from temporalio.client import Client

from retinue.config import Settings
from retinue.engine.loop import CANCELLED_RESULT
from retinue.llm.base import ToolSpec
from retinue.messages import Message, ToolResultMessage
from retinue.runtime import Runtime
from retinue.server.security import Security
from retinue.server.temporal_front import TemporalFront, create_temporal_app
from retinue.subagents.roles import Role
from retinue.temporal._types import Limits
from retinue.temporal.client import TemporalConversations
from retinue.temporal.worker import make_worker
from retinue.testing import ScriptedModel, call_tool, call_tools
from retinue.tools.base import Tool, tool

pytestmark = pytest.mark.timeout(120)  # a hang bound

FAST = Limits(heartbeat_s=1.5)
TOKEN = "cancel-test-token"


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def tools_for(log: Path) -> list[Tool]:
    """``quick`` answers at once; ``stuck`` writes ``started``, then waits until cancelled
    (and writes ``cancelled``)."""

    @tool
    async def quick() -> str:
        """Answer at once."""
        return "quick done"

    @tool
    async def stuck() -> str:
        """Start, then wait."""
        with log.open("a") as f:
            f.write("started\n")
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            with log.open("a") as f:
                f.write("cancelled\n")
            raise
        return "never"

    return [quick, stuck]


def runtime_for(tmp_path: Path, model: ScriptedModel, log: Path, **more: object) -> Runtime:
    settings = Settings(home=tmp_path / "home", workspace=tmp_path)
    return Runtime.create(
        settings, model=model, extra_tools=tools_for(log), with_memory=False, builtins=False,
        **more,  # type: ignore[arg-type]
    )  # fmt: skip


async def until(check: Callable[[], bool | Awaitable[bool]]) -> None:
    """Wait until ``check`` holds (the test's timeout bounds it)."""
    while True:
        held = check()
        if await held if inspect.isawaitable(held) else held:
            return
        await asyncio.sleep(0.05)


def after_cancel(messages: Sequence[Message], _tools: Sequence[ToolSpec]) -> str:
    got = {m.name: m.content for m in messages if isinstance(m, ToolResultMessage)}
    return f"quick: {got['quick']}; stuck: {got['stuck']}"


async def test_a_cancelled_turn_cancels_its_calls_and_the_conversation_goes_on(
    temporal_address: str, tmp_path: Path
) -> None:
    log = tmp_path / "log.txt"
    model = ScriptedModel([call_tools(("quick", {}), ("stuck", {})), after_cancel])
    client = await Client.connect(temporal_address)
    convs = TemporalConversations(client, task_queue=f"test-{uuid.uuid4().hex}", limits=FAST)
    async with make_worker(client, runtime_for(tmp_path, model, log), convs.task_queue):
        turn = asyncio.create_task(convs.send("cancel", "run both"))
        await until(lambda: "started" in lines(log))
        assert await convs.cancel_turn("cancel") is True
        reply = await turn
        await until(lambda: "cancelled" in lines(log))  # the worker's call was cancelled
        assert await convs.cancel_turn("cancel") is False  # (no turn runs now)
        state = await convs.state("cancel")
        after = await convs.send("cancel", "what happened?")
    assert reply.stop_reason == "interrupted"
    assert state.state == "idle"
    # the call that finished kept its result, the one in flight was answered "cancelled"
    assert after.content == f"quick: quick done; stuck: {CANCELLED_RESULT}"
    assert lines(log) == ["started", "cancelled"]  # (it ran once, and was not run again)
    model.assert_done()


def role(name: str) -> Role:
    return Role(name, f"the {name} role", f"You are {name}.", None, f"scripted:{name}",
                frozenset())  # fmt: skip


async def test_the_front_end_interrupts_a_turn_and_its_session_s_turn(
    temporal_address: str, tmp_path: Path
) -> None:
    log = tmp_path / "log.txt"
    helper = ScriptedModel([call_tool("stuck", {}), "helper answers"])
    main = ScriptedModel([
        call_tool("SubAgent", {"role": "helper", "task": "wait", "interactive": True}),
        "main goes on",
    ])  # fmt: skip
    runtime = runtime_for(tmp_path, main, log, roles=[role("helper")],
                          model_for=lambda _spec: helper)  # fmt: skip
    client = await Client.connect(temporal_address)
    queue = f"test-{uuid.uuid4().hex}"
    front = TemporalFront(client, task_queue=queue)
    app = create_temporal_app(front, Security(TOKEN))
    convs = front.conversations("default")
    transport = httpx.ASGITransport(app=app)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        make_worker(client, runtime, queue),
        httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", headers=auth) as http,
    ):
        turn = asyncio.create_task(convs.send("tree", "ask the helper"))
        await until(lambda: "started" in lines(log))  # the session's call runs
        answer = await http.post("/v1/sessions/conv-tree/interrupt")
        reply = await turn
        await until(lambda: "cancelled" in lines(log))  # the session's call was cancelled
        missing = await http.post("/v1/sessions/conv-nothing-here/interrupt")

        async def helper_idle() -> bool:
            return [(s.role, s.state) for s in (await convs.state("tree")).sessions] == [
                ("helper", "idle")
            ]

        await until(helper_idle)  # the session's turn ended too
        sessions = (await convs.state("tree")).sessions
        child = client.get_workflow_handle(sessions[0].workflow_id)
        helper_history = await child.query("history")
        after = await convs.send("tree", "go on")
    assert answer.status_code == 200 and answer.json() == {"id": "conv-tree", "interrupted": True}
    assert missing.status_code == 404
    assert reply.stop_reason == "interrupted"
    # the session's call was answered "cancelled": its history is valid
    results = [m for m in helper_history if m.get("role") == "tool"]
    assert [r.get("content") for r in results] == [CANCELLED_RESULT]
    assert after.content == "main goes on"
