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


def stuck_tool(log: Path) -> Tool:
    """``stuck`` writes ``started``, then waits until cancelled (and writes ``cancelled``)."""

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

    return stuck


def tools_for(log: Path) -> list[Tool]:
    """``quick`` answers at once; ``stuck``: :func:`stuck_tool`."""

    @tool
    async def quick() -> str:
        """Answer at once."""
        return "quick done"

    return [quick, stuck_tool(log)]


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


async def test_a_turn_waiting_for_an_approval_or_its_model_is_cancelled_too(
    temporal_address: str, tmp_path: Path
) -> None:
    deployed: list[str] = []

    @tool(needs_approval=True)
    async def deploy() -> str:
        """Deploy."""
        deployed.append("deployed")
        return "deployed"

    model = ScriptedModel([call_tool("deploy", {}), "never read: the call is cancelled", "after"])
    settings = Settings(home=tmp_path / "home", workspace=tmp_path)
    runtime = Runtime.create(settings, model=model, extra_tools=[deploy], with_memory=False,
                             builtins=False)  # fmt: skip
    client = await Client.connect(temporal_address)
    convs = TemporalConversations(client, task_queue=f"test-{uuid.uuid4().hex}", limits=FAST)
    async with make_worker(client, runtime, convs.task_queue):
        await convs.start("asks")

        async def asked() -> bool:
            return bool(await convs.approvals("asks"))

        waiting = asyncio.create_task(convs.send("asks", "deploy"))
        await until(asked)
        assert await convs.cancel_turn("asks") is True
        on_approval = await waiting
        pending = await convs.approvals("asks")
        model.delay = 3600.0  # the next model call waits (its step is taken first)
        thinking = asyncio.create_task(convs.send("asks", "think"))
        await until(lambda: model.call_count == 2)
        assert await convs.cancel_turn("asks") is True
        on_model = await thinking
        model.delay = 0.0
        after = await convs.send("asks", "go on")
        history = await convs.history("asks")
    assert (on_approval.stop_reason, on_model.stop_reason) == ("interrupted", "interrupted")
    assert pending == [] and deployed == []  # the request was withdrawn; the call never ran
    assert after.content == "after"
    said = [(m.role, m.content) for m in history]
    assert said == [
        ("user", "deploy"), ("assistant", ""), ("tool", CANCELLED_RESULT),
        ("assistant", "Stopped: the turn was cancelled."),
        ("user", "think"), ("assistant", "Stopped: the turn was cancelled."),
        ("user", "go on"), ("assistant", "after"),
    ]  # fmt: skip
