"""One trace per user message on Temporal: the front end's ``retinue.message`` span, the
workflow's ``invoke_agent`` turn, the activities' ``chat`` and ``execute_tool`` spans, and a
sub-agent's turn in its child workflow, over a real dev server and an in-process worker."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

pytest.importorskip("temporalio", reason="the temporal extra (temporalio) is not installed")

from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.client import Client
from temporalio.worker import Replayer, Worker

from retinue.config import Settings
from retinue.runtime import Runtime
from retinue.server.security import Security
from retinue.server.temporal_front import MESSAGE_SPAN, TemporalFront, create_temporal_app
from retinue.subagents.roles import Role
from retinue.telemetry import trace as tel
from retinue.temporal.activities import TurnActivities
from retinue.temporal.client import workflow_id
from retinue.temporal.tracing import TracingInterceptor
from retinue.temporal.worker import make_worker, workflow_runner
from retinue.temporal.workflow import ConversationWorkflow
from retinue.testing import ScriptedModel, call_tool
from retinue.tools.base import tool

pytestmark = pytest.mark.timeout(120)


@tool
async def echo(text: str) -> str:
    """Say it back."""
    return f"echo {text}"


class Started(SpanProcessor):
    """The ids of the spans started, in order."""

    def __init__(self) -> None:
        self.ids: list[int] = []

    def on_start(self, span: Span, parent_context: object = None) -> None:
        assert span.context is not None
        self.ids.append(span.context.span_id)


@dataclass
class Traced:
    provider: TracerProvider
    exporter: InMemorySpanExporter

    async def spans(self, count: int) -> list[ReadableSpan]:
        """The spans, once ``count`` have ended (a session's turn span ends after its reply
        reached its parent); a hang bound, not a measurement."""
        for _ in range(400):
            if len(self.exporter.get_finished_spans()) >= count:
                break
            await asyncio.sleep(0.05)
        return list(self.exporter.get_finished_spans())


@pytest.fixture
def traced() -> Iterator[Traced]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tel.enable(provider)
    try:
        yield Traced(provider, exporter)
    finally:
        tel.disable()
        provider.shutdown()


def by_trace(spans: list[ReadableSpan]) -> list[list[ReadableSpan]]:
    """The spans of each trace, the traces in the order their first span started."""
    traces: dict[int, list[ReadableSpan]] = {}
    for span in sorted(spans, key=lambda s: s.start_time or 0):
        assert span.context is not None
        traces.setdefault(span.context.trace_id, []).append(span)
    return list(traces.values())


def tree(spans: list[ReadableSpan]) -> list[str]:
    """Each span as ``parent > name``, sorted; a root's parent is ``-``, a parent that is
    not among ``spans`` is ``?``."""
    names = {s.context.span_id: s.name for s in spans if s.context is not None}
    rows = []
    for span in spans:
        parent = "-" if span.parent is None else names.get(span.parent.span_id, "?")
        rows.append(f"{parent} > {span.name}")
    return sorted(rows)


async def traced_front(address: str, traced: Traced) -> TemporalFront:
    client = await Client.connect(address, interceptors=[TracingInterceptor(traced.provider)])
    return TemporalFront(client, task_queue=f"test-{uuid.uuid4().hex}", poll_s=0.05)


def runtime_for(
    tmp_path: Path, main: ScriptedModel, models: dict[str, ScriptedModel] | None = None
) -> Runtime:
    settings = Settings(home=tmp_path / "home", workspace=tmp_path)
    helper = Role("helper", "the helper role", "You are helper.", None, "scripted:helper",
                  frozenset())  # fmt: skip
    return Runtime.create(
        settings, model=main, model_for=(models or {}).__getitem__, roles=[helper],
        extra_tools=[echo], with_memory=False, builtins=False,
    )  # fmt: skip


async def test_each_message_is_one_trace_from_the_front_end_to_its_tool_call(
    temporal_address: str, tmp_path: Path, traced: Traced
) -> None:
    calling = call_tool("echo", {"text": "hi"})
    model = ScriptedModel([calling, "said hi", "bye"])
    front = await traced_front(temporal_address, traced)
    cid = f"traced-{uuid.uuid4().hex[:8]}"
    async with make_worker(front.client, runtime_for(tmp_path, model), front.task_queue):
        first = await front.start("default", cid, "say hi")
        second = await front.start("default", cid, "now go", on_event=lambda _e: None)
        spans = await traced.spans(8)
    assert (first.content, second.content) == ("said hi", "bye")
    one, two = by_trace(spans)  # two messages, two traces
    assert tree(one) == [
        f"- > {MESSAGE_SPAN}",
        "invoke_agent main > chat model",
        "invoke_agent main > chat model",
        "invoke_agent main > execute_tool echo",
        f"{MESSAGE_SPAN} > invoke_agent main",
    ]
    assert tree(two) == [
        f"- > {MESSAGE_SPAN}",
        "invoke_agent main > chat model",
        f"{MESSAGE_SPAN} > invoke_agent main",
    ]
    turn = next(s for s in one if s.name == "invoke_agent main")
    assert turn.attributes is not None and turn.attributes["gen_ai.agent.id"] == cid
    assert turn.attributes["retinue.stop_reason"] == "final"
    tool_span = next(s for s in one if s.name.startswith("execute_tool"))
    assert tool_span.attributes is not None
    assert tool_span.attributes["gen_ai.tool.call.id"] == calling.tool_calls[0].id
    chats = [s for s in one if s.name.startswith("chat")]
    assert all(s.attributes and s.attributes["gen_ai.usage.input_tokens"] for s in chats)
    # the spans follow the turn: the model's calls start while the turn runs, in order
    (message,) = (s for s in one if s.name == MESSAGE_SPAN)
    assert message.start_time and message.end_time and turn.start_time and turn.end_time
    assert message.start_time <= turn.start_time <= turn.end_time <= message.end_time
    assert len(spans) == 8  # (nothing else: queries and polls make no spans)
    model.assert_done()
    # a worker that replays the workflow makes its turns' spans again, with the same ids,
    # and exports none of them (they were exported when they ran)
    history = await front.client.get_workflow_handle(workflow_id("default", cid)).fetch_history()
    started = Started()
    traced.provider.add_span_processor(started)
    replayer = Replayer(workflows=[ConversationWorkflow], workflow_runner=workflow_runner(),
                        interceptors=[TracingInterceptor(traced.provider)])  # fmt: skip
    await replayer.replay_workflow(history)
    turns = {s.context.span_id for s in spans if s.context and s.name == "invoke_agent main"}
    assert len(turns) == 2 and set(started.ids) == turns
    assert len(traced.exporter.get_finished_spans()) == 8


async def test_a_turn_its_worker_replays_at_every_step_is_still_one_whole_trace(
    temporal_address: str, tmp_path: Path, traced: Traced
) -> None:
    """A worker that keeps no workflow in its cache drops the workflow after each step and
    replays it for the next: the turn's span is made again each time, and ended once."""
    model = ScriptedModel([call_tool("echo", {"text": "hi"}), call_tool("echo", {"text": "2"}),
                           "said hi twice"])  # fmt: skip
    front = await traced_front(temporal_address, traced)
    runtime = runtime_for(tmp_path, model)
    forgetful = Worker(
        front.client, task_queue=front.task_queue, workflows=[ConversationWorkflow],
        activities=TurnActivities(runtime).activities(), workflow_runner=workflow_runner(),
        max_cached_workflows=0,
    )  # fmt: skip
    started = Started()
    traced.provider.add_span_processor(started)
    async with forgetful:
        out = await front.start("default", f"traced-{uuid.uuid4().hex[:8]}", "say hi twice")
        spans = await traced.spans(7)
    assert out.content == "said hi twice"
    (one,) = by_trace(spans)
    assert tree(one) == [
        f"- > {MESSAGE_SPAN}",
        "invoke_agent main > chat model",
        "invoke_agent main > chat model",
        "invoke_agent main > chat model",
        "invoke_agent main > execute_tool echo",
        "invoke_agent main > execute_tool echo",
        f"{MESSAGE_SPAN} > invoke_agent main",
    ]
    assert len({s.context.span_id for s in spans if s.context}) == len(spans) == 7
    (turn,) = (s for s in spans if s.name == "invoke_agent main" and s.context)
    assert turn.context is not None
    assert started.ids.count(turn.context.span_id) > 1  # (made again at each replay)
    model.assert_done()


async def test_a_sub_agent_s_turn_in_its_child_workflow_is_in_its_parent_s_trace(
    temporal_address: str, tmp_path: Path, traced: Traced
) -> None:
    main = ScriptedModel([call_tool("SubAgent", {"role": "helper", "task": "echo it"}),
                          "the helper echoed"])  # fmt: skip
    helper = ScriptedModel([call_tool("echo", {"text": "it"}), "echoed it"],
                           name="scripted:helper")  # fmt: skip
    front = await traced_front(temporal_address, traced)
    cid = f"traced-{uuid.uuid4().hex[:8]}"
    runtime = runtime_for(tmp_path, main, {"scripted:helper": helper})
    async with make_worker(front.client, runtime, front.task_queue):
        out = await front.start("default", cid, "ask the helper")
        spans = await traced.spans(8)
        await front.delete("default", cid)
    assert out.content == "the helper echoed"
    (one,) = by_trace(spans)
    assert tree(one) == [
        f"- > {MESSAGE_SPAN}",
        "invoke_agent helper > chat helper",
        "invoke_agent helper > chat helper",
        "invoke_agent helper > execute_tool echo",
        "invoke_agent main > chat model",
        "invoke_agent main > chat model",
        "invoke_agent main > invoke_agent helper",
        f"{MESSAGE_SPAN} > invoke_agent main",
    ]
    session = next(s for s in one if s.name == "invoke_agent helper")
    assert session.attributes is not None
    assert session.attributes["gen_ai.agent.id"] == f"{cid}/helper#1"
    assert session.attributes["retinue.agent.depth"] == 1
    main.assert_done()
    helper.assert_done()


async def test_a_request_s_traceparent_is_the_parent_of_its_message(
    temporal_address: str, tmp_path: Path, traced: Traced
) -> None:
    model = ScriptedModel([call_tool("echo", {"text": "hi"}), "said hi"])
    front = await traced_front(temporal_address, traced)
    app = create_temporal_app(front, Security.build("secret"))
    trace_id, span_id = "ab" * 16, "cd" * 8  # (the caller's span)
    headers = {"Authorization": "Bearer secret", "traceparent": f"00-{trace_id}-{span_id}-01"}
    http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")
    async with make_worker(front.client, runtime_for(tmp_path, model), front.task_queue), http:
        sent = await http.post(f"/v1/conversations/traced-{uuid.uuid4().hex[:8]}/messages",
                               json={"content": "say hi"}, headers=headers)  # fmt: skip
        spans = await traced.spans(5)
    assert sent.status_code == 200 and sent.json()["content"] == "said hi"
    assert {s.context.trace_id for s in spans if s.context} == {int(trace_id, 16)}
    (message,) = (s for s in spans if s.name == MESSAGE_SPAN)
    assert message.parent is not None and message.parent.span_id == int(span_id, 16)
    assert len(spans) == 5 and tree(spans)[0] == f"? > {MESSAGE_SPAN}"  # (the caller's: not here)


async def test_tracing_off_carries_nothing(temporal_address: str, tmp_path: Path) -> None:
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    model = ScriptedModel([call_tool("echo", {"text": "hi"}), "said hi"])
    front = await traced_front(temporal_address, Traced(provider, exporter))
    async with make_worker(front.client, runtime_for(tmp_path, model), front.task_queue):
        out = await front.start("default", f"untraced-{uuid.uuid4().hex[:8]}", "say hi")
    assert out.content == "said hi"
    assert exporter.get_finished_spans() == ()  # (tel.enable was not called)
