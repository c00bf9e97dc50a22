"""The Temporal front end in process (:class:`~retinue.server.temporal_front.TemporalFront`)
over a real dev server and an in-process worker: what a streamed turn's polls carry, counted
by a client interceptor that logs every query and its answer; how many turns each tenant may
have in flight."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("temporalio", reason="the temporal extra (temporalio) is not installed")

from temporalio.client import Client, Interceptor, OutboundInterceptor, QueryWorkflowInput
from temporalio.service import RPCError

from retinue.config import Settings
from retinue.engine.config import RunOutput
from retinue.events import Event, ToolFinished, ToolStarted
from retinue.runtime import Runtime
from retinue.server.conversations import ServerBusy
from retinue.server.temporal_front import TemporalFront, front_status
from retinue.temporal._types import HistoryPage
from retinue.temporal.client import workflow_id
from retinue.temporal.worker import make_worker
from retinue.testing import ScriptedModel, call_tool
from retinue.tools.base import Tool, tool

pytestmark = pytest.mark.timeout(60)


class QueryLog(Interceptor):
    """Every query a client makes: its name and its answer, in order."""

    def __init__(self, rows: list[tuple[str, Any]] | None = None) -> None:
        self.rows: list[tuple[str, Any]] = rows or []

    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        return _Logged(next, self.rows)

    def answers(self, name: str) -> list[Any]:
        return [answer for query, answer in self.rows if query == name]


class _Logged(OutboundInterceptor):
    def __init__(self, next: OutboundInterceptor, rows: list[tuple[str, Any]]) -> None:
        super().__init__(next)
        self._rows = rows

    async def query_workflow(self, input: QueryWorkflowInput) -> Any:
        answer = await super().query_workflow(input)
        self._rows.append((input.query, answer))
        return answer


def size(answer: Any) -> int:
    """An answer's size as JSON, as it crossed the wire."""
    return len(json.dumps(asdict(answer) if isinstance(answer, HistoryPage) else answer))


def runtime_for(tmp_path: Path, model: ScriptedModel, tools: list[Tool]) -> Runtime:
    settings = Settings(home=tmp_path / "home", workspace=tmp_path)
    return Runtime.create(
        settings, model=model, model_for=lambda _s: model, extra_tools=tools,
        with_memory=False, builtins=False,
    )  # fmt: skip


async def test_a_streamed_turn_s_polls_carry_only_its_new_messages(
    temporal_address: str, tmp_path: Path
) -> None:
    released = asyncio.Event()  # the first call waits until the front end has streamed it

    @tool
    async def slow(n: int) -> str:
        """Wait for the test."""
        await released.wait()
        return f"slow {n}"

    earlier, big = 6, "x" * 4_000  # a long conversation: 12 messages, 24 kB (no compression)
    script: list[Any] = [f"ok {i}" for i in range(earlier)]
    script += [call_tool("slow", {"n": 1}), call_tool("slow", {"n": 2}), "done"]
    model = ScriptedModel(script)
    log = QueryLog()
    client = await Client.connect(temporal_address, interceptors=[log])
    queue = f"test-{uuid.uuid4().hex}"
    front = TemporalFront(client, task_queue=queue, poll_s=0.05)
    events: list[Event] = []

    def sink(event: Event) -> None:
        events.append(event)
        if isinstance(event, ToolStarted):
            released.set()

    cid = f"long-{uuid.uuid4().hex[:8]}"
    async with make_worker(client, runtime_for(tmp_path, model, [slow]), queue):
        try:
            for i in range(earlier):
                await front.start("default", cid, f"{i} {big}")
            log.rows.clear()  # from here on, the streamed turn's queries alone
            out = await front.start("default", cid, "go slow", on_event=sink)
            turn = QueryLog(list(log.rows))  # (what the turn asked; then the test's own)
            history = await front.history("default", cid)
            log.rows.clear()
            views = await front.views("default")  # the list of conversations
        finally:  # (a worker shuts down once its activities end)
            released.set()
    assert out.content == "done" and out.tools_used == ["slow"]
    assert history is not None and len(history) == 2 * earlier + 6
    pages = turn.answers("history_since")
    # the first answer is the length alone; then each poll carries what is new, once: the six
    # messages of the turn (its message, two calls and their results, the answer)
    assert pages[0].total == 2 * earlier and pages[0].messages == []
    carried = [m for page in pages[1:] for m in page.messages]
    assert [m["role"] for m in carried] == ["user", "assistant", "tool", "assistant", "tool",
                                            "assistant"]  # fmt: skip
    assert sum(1 for page in pages[1:] if page.messages) >= 2  # (the call waited: two polls)
    assert turn.answers("history") == []  # (the whole history was never asked for)
    # the turn's tools came from its own messages: past the last user message, five
    assert [len(turn) for turn in turn.answers("last_turn")] == [5]
    assert max(size(answer) for _, answer in turn.rows) < len(big)
    started = [e.name for e in events if isinstance(e, ToolStarted)]
    finished = [e.name for e in events if isinstance(e, ToolFinished)]
    assert started == finished == ["slow", "slow"]
    # the list reads each conversation's outline (its length and opening), not its history
    assert [(v["id"], v["messages"], v["title"]) for v in views] == [
        (cid, 2 * earlier + 6, f"0 {big}"[:80])
    ]
    assert [query for query, _ in log.rows if query != "outline"] == []
    model.assert_done()


async def test_one_tenant_cannot_take_every_turn_of_a_front_end(temporal_address: str) -> None:
    client = await Client.connect(temporal_address)
    # no worker serves this queue: every turn started waits, in flight, until cancelled
    front = TemporalFront(client, task_queue=f"test-{uuid.uuid4().hex}", max_turns=3,
                          max_tenant_turns=2)  # fmt: skip
    run = uuid.uuid4().hex[:8]
    started: list[tuple[str, str]] = []
    turns: list[asyncio.Task[RunOutput]] = []

    def start(tenant: str, n: int) -> asyncio.Task[RunOutput]:
        cid = f"cap-{run}-{n}"
        turn = front.start(tenant, cid, "hello")
        started.append((tenant, cid))
        turns.append(turn)
        return turn

    try:
        first = start("acme", 1)
        start("acme", 2)
        with pytest.raises(ServerBusy) as tenant_full:
            start("acme", 3)
        assert front_status(tenant_full.value)[0] == 429
        assert "tenant 'acme'" in str(tenant_full.value)
        assert "max_tenant_turns=2" in str(tenant_full.value)
        start("default", 4)  # the other tenant still has room
        with pytest.raises(ServerBusy) as front_full:
            start("default", 5)
        assert front_status(front_full.value)[0] == 429
        assert "max_turns=3" in str(front_full.value)
        first.cancel()  # one of acme's turns ends: acme may start one again
        await asyncio.gather(first, return_exceptions=True)
        start("acme", 6)
        with pytest.raises(ServerBusy):
            start("acme", 7)
    finally:
        for turn in turns:
            turn.cancel()
        await asyncio.gather(*turns, return_exceptions=True)
        for tenant, cid in started:  # (leave no workflow running on the session's server)
            with contextlib.suppress(RPCError):
                await client.get_workflow_handle(workflow_id(tenant, cid)).terminate()
    assert front._turns == {} and front._total == 0  # every turn, ended, was counted out
