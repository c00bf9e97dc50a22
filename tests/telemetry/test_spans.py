"""The span tree of a scripted nested interactive scenario, read from the OTel SDK's
in-memory exporter: names, parent links, GenAI attributes, AskParent, a background session,
a cancelled turn (its spans ended with an error status, none left open)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode
from subagent_kit import Kit, echo, make_kit  # pyright: ignore[reportMissingImports]
from tracekit import Traced

from retinue.engine import RunConfig
from retinue.engine.session import Session
from retinue.messages import SystemMessage
from retinue.subagents import subagent_tools
from retinue.telemetry import trace as tel
from retinue.telemetry.prices import set_prices
from retinue.testing import ScriptedModel, call_tool
from retinue.tools import ToolContext, ToolRegistry, tool

pytestmark = pytest.mark.timeout(20)

ASKS = frozenset({"ask_parent"})


@pytest.fixture
def kit(tmp_path: Path) -> Kit:
    return make_kit(tmp_path, ("reviewer", ASKS), "tester")


def main_session(kit: Kit, model: ScriptedModel) -> Session:
    tools = ToolRegistry([echo, *subagent_tools()])
    config = RunConfig(model, [SystemMessage("main")], tools, kit.ctx("main"), interactive=True)
    return Session("main", config)


def parent_of(span: ReadableSpan, spans: list[ReadableSpan]) -> ReadableSpan | None:
    if span.parent is None:
        return None
    return next(s for s in spans if s.context and s.context.span_id == span.parent.span_id)


def attrs(span: ReadableSpan) -> dict[str, Any]:
    found: dict[str, Any] = dict(span.attributes or {})
    return found


def trace_of(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.trace_id


def named(spans: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return sorted((s for s in spans if s.name == name), key=lambda s: s.start_time or 0)


async def test_a_nested_interactive_run_is_one_trace_with_each_session_under_its_tool_span(
    kit: Kit, traced: Traced
) -> None:
    set_prices({"scripted:main": {"input": 1.0, "output": 2.0}})
    kit.models["reviewer"].add(call_tool("AskParent", {"question": "tabs or spaces?"}), "spaces")
    kit.models["tester"].add("tests pass")
    bg = {"role": "tester", "interactive": True, "background": True}
    main = ScriptedModel(
        [
            call_tool("SubAgent", {"task": "format it", "role": "reviewer", "interactive": True}),
            call_tool("SubAgent", {"task": "spaces", "role": "reviewer", "interactive": True}),
            call_tool("SubAgent", {"task": "run tests", **bg}),
            call_tool("SubAgentStatus", {"role": "tester", "wait": True}),
            "all done",
        ],
        name="scripted:main",
    )
    try:
        async with kit.manager.owner("main"):
            out = await main_session(kit, main).send("go")
    finally:
        set_prices(None)
    assert out.content == "all done"
    spans = traced.spans()
    assert traced.open.open == {}
    assert len({s.context.trace_id for s in spans if s.context}) == 1  # one user message, one trace

    (root,) = named(spans, "invoke_agent main")
    assert root.parent is None
    a = attrs(root)
    assert a["gen_ai.operation.name"] == "invoke_agent"
    assert a["gen_ai.agent.name"] == "main" and a["gen_ai.conversation.id"] == "main"
    assert a["gen_ai.provider.name"] == "scripted" and a["retinue.session.interactive"] is True
    assert a["retinue.stop_reason"] == "waiting_for_input"
    main_chats = [s for s in named(spans, "chat main") if parent_of(s, spans) is root]
    assert len(main_chats) == 5
    c = attrs(main_chats[0])
    assert c["gen_ai.operation.name"] == "chat" and c["gen_ai.request.model"] == "main"
    assert c["gen_ai.usage.input_tokens"] > 0 and c["gen_ai.usage.output_tokens"] > 0
    expected = (c["gen_ai.usage.input_tokens"] * 1.0 + c["gen_ai.usage.output_tokens"] * 2.0) / 1e6
    assert c["retinue.cost_usd"] == pytest.approx(expected)
    assert "gen_ai.input.messages" not in c  # content capture is off by default
    sub_calls = named(spans, "execute_tool SubAgent")
    assert len(sub_calls) == 3 and all(parent_of(s, spans) is root for s in sub_calls)
    first, answer, background = sub_calls
    assert attrs(first)["gen_ai.tool.name"] == "SubAgent"
    assert attrs(first)["gen_ai.tool.call.id"]

    # the reviewer's turn began under the first SubAgent call, and went on there after the
    # parent answered its question (AskParent) with the second one: one turn, one span
    (reviewer,) = named(spans, "invoke_agent reviewer")
    assert parent_of(reviewer, spans) is first
    r = attrs(reviewer)
    assert r["gen_ai.agent.id"] == "main/reviewer" and r["retinue.agent.depth"] == 1
    assert "retinue.cost_usd" not in r  # scripted:reviewer has no price: unknown, not 0
    (asked,) = named(spans, "execute_tool AskParent")
    assert parent_of(asked, spans) is reviewer
    assert [parent_of(s, spans) for s in named(spans, "chat reviewer")] == [reviewer, reviewer]
    assert answer.parent is not None and not [s for s in spans if parent_of(s, spans) is answer]

    # the background session's turn is a child of the SubAgent call that started it
    (tester,) = named(spans, "invoke_agent tester")
    assert parent_of(tester, spans) is background
    assert attrs(tester)["gen_ai.agent.name"] == "tester"
    assert all(s.status.status_code is not StatusCode.ERROR for s in spans)


async def test_a_cancelled_turn_ends_every_span_with_an_error_status(
    kit: Kit, traced: Traced
) -> None:
    reviewer = kit.models["reviewer"]
    reviewer.delay = 30  # the sub-agent's model call is in flight when the turn is cancelled
    reviewer.add("never")
    main = ScriptedModel(
        [call_tool("SubAgent", {"task": "look", "role": "reviewer", "interactive": True})],
        name="scripted:main",
    )
    async with kit.manager.owner("main"):
        session = main_session(kit, main)
        turn = asyncio.create_task(session.send("go"))
        while reviewer.call_count == 0:
            await asyncio.sleep(0.01)
        assert session.interrupt()
        out = await turn
    assert out.stop_reason == "interrupted"
    assert traced.open.open == {}  # none left open
    spans = traced.spans()
    by_name = {s.name: s for s in spans}
    for name in ("invoke_agent main", "execute_tool SubAgent", "invoke_agent reviewer"):
        status = by_name[name].status
        assert status.status_code is StatusCode.ERROR and status.description == "cancelled"
    (in_flight,) = named(spans, "chat reviewer")
    assert in_flight.status.status_code is StatusCode.ERROR
    assert attrs(in_flight)["error.type"] == "cancelled"
    assert "gen_ai.usage.input_tokens" not in attrs(in_flight)


async def test_content_capture_records_prompts_and_completions(
    tmp_path: Path, traced: Traced
) -> None:
    tel.enable(traced.provider, capture_content=True)
    kit = make_kit(tmp_path, "reviewer")
    main = ScriptedModel([call_tool("Echo", {"text": "hi"}), "said hi"], name="scripted:main")
    async with kit.manager.owner("main"):
        await main_session(kit, main).send("say hi")
    spans = traced.spans()
    (root,) = named(spans, "invoke_agent main")
    assert "say hi" in str(attrs(root)["gen_ai.input.messages"])
    assert "said hi" in str(attrs(root)["gen_ai.output.messages"])
    (echoed,) = named(spans, "execute_tool Echo")
    assert attrs(echoed)["gen_ai.tool.call.result"] == "echo:hi"


async def test_tracing_off_makes_no_spans(kit: Kit, traced: Traced) -> None:
    tel.disable()
    main = ScriptedModel(["hello"], name="scripted:main")
    await main_session(kit, main).send("hi")
    assert traced.spans() == []


async def test_steering_stays_in_the_steered_turn_and_is_an_event_on_it(
    tmp_path: Path, traced: Traced
) -> None:
    entered, opened = asyncio.Event(), asyncio.Event()

    @tool("Gate")
    async def gate(ctx: ToolContext) -> str:
        """Wait at the gate."""
        entered.set()
        await opened.wait()
        return "through"

    kit = make_kit(tmp_path, "reviewer", extra_tools=[gate])
    kit.models["reviewer"].add(call_tool("Gate"), "narrowed to a.py")

    bg = {"role": "reviewer", "interactive": True, "background": True}
    main = ScriptedModel(name="scripted:main").add(
        call_tool("SubAgent", {"task": "review everything", **bg}),
        "started it",
        call_tool("SubAgentStatus", {"role": "reviewer", "wait": True}),
        "done",
    )
    async with kit.manager.owner("main"):
        session = main_session(kit, main)
        assert (await session.send("go")).content == "started it"
        await entered.wait()  # the reviewer's turn is inside a tool call
        ack = await kit.manager.steer(kit.ctx(), task="only a.py", role="reviewer")
        assert ack.startswith("[steering delivered")
        opened.set()
        assert (await session.send("and?")).content == "done"
    spans = traced.spans()
    assert traced.open.open == {}
    (child,) = named(spans, "invoke_agent reviewer")
    (first,) = named(spans, "execute_tool SubAgent")
    assert parent_of(child, spans) is first  # the turn stays where it began
    assert [e.name for e in child.events] == ["retinue.steered"]
    assert [parent_of(c, spans) for c in named(spans, "chat reviewer")] == [child, child]
    first_turn, second_turn = named(spans, "invoke_agent main")
    assert trace_of(child) == trace_of(first_turn)  # one user message, one trace
    assert trace_of(second_turn) != trace_of(first_turn)
