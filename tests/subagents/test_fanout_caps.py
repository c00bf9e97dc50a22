"""Fan-out caps and the delegation loop detector (retinue.subagents.caps), through the
SubAgent tool of a real run loop with scripted models."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from subagent_kit import Kit, echo

from retinue.config import Settings
from retinue.engine import RunConfig, RunOutput, run
from retinue.events import Event
from retinue.messages import SystemMessage, ToolResultMessage, UserMessage
from retinue.runtime import Runtime
from retinue.subagents import subagent_tools
from retinue.subagents.caps import LIMIT_REACHED, FanOutLimits
from retinue.testing import ScriptedModel, call_tool, call_tools
from retinue.tools import ToolContext, ToolRegistry


def delegate(task: str, role: str = "reviewer", **more: Any) -> dict[str, Any]:
    return {"task": task, "role": role, **more}


async def run_main(kit: Kit, model: ScriptedModel, events: list[Event]) -> RunOutput:
    """The main agent's run with ``events`` as its sink; its sessions end afterwards."""
    ctx = ToolContext(
        "main",
        kit.workspace,
        kit.workspace,
        role="main",
        call_chain=("main",),
        manager=kit.manager,
        events=events.append,
    )
    tools = ToolRegistry([echo, *subagent_tools()])
    config = RunConfig(model, [SystemMessage("main"), UserMessage("go")], tools, ctx)
    async with kit.manager.owner("main"):
        return await run(config)


def results(model: ScriptedModel) -> list[str]:
    """The tool results the main model was shown, in order (from its last request)."""
    last = model.calls[-1].messages
    return [m.content for m in last if isinstance(m, ToolResultMessage)]


def limits(events: list[Event]) -> list[dict[str, Any]]:
    return [e.data for e in events if e.kind == LIMIT_REACHED]


def assert_nothing_left(kit: Kit) -> None:
    assert kit.manager.registry.held_by() == []
    assert kit.manager.caps.open_in(kit.ctx()) == 0


async def test_the_run_cap_refuses_the_next_session_with_a_reason(kit: Kit) -> None:
    kit.manager.caps.limits = FanOutLimits(per_run=2)
    kit.models["reviewer"].add("first ok", "second ok")
    main = ScriptedModel(
        [call_tools(*(("SubAgent", delegate(f"review part {i}")) for i in (1, 2, 3))), "done"]
    )
    events: list[Event] = []
    out = await run_main(kit, main, events)
    assert out.content == "done"
    first, second, third = results(main)
    assert (first, second) == ("first ok", "second ok")
    assert third.startswith("Error: cannot start 'reviewer': this run has started 2 sub-agent")
    assert "max_subagents_per_run=2" in third
    [reached] = limits(events)
    assert reached["limit"] == "subagents_per_run" and reached["value"] == 2
    assert reached["role"] == "reviewer" and reached["stopped"] is False
    assert len(kit.memory.sessions()) == 2
    assert_nothing_left(kit)


async def test_a_model_that_keeps_delegating_is_stopped_at_the_cap(kit: Kit) -> None:
    """The runaway case: every step delegates a new task; past the cap each is refused, and
    the third refusal ends the turn with a readable reason; nothing stays open."""
    kit.manager.caps.limits = FanOutLimits(per_run=3)
    kit.models["reviewer"].add(*(f"answer {i}" for i in range(3)))
    main = ScriptedModel([call_tool("SubAgent", delegate(f"task {i}")) for i in range(40)])
    events: list[Event] = []
    out = await run_main(kit, main, events)
    assert out.stop_reason == "repeated_call" and out.stopped
    assert "max_subagents_per_run=3" in out.content and out.content.startswith("Stopped:")
    assert len(main.calls) == 6  # 3 sessions, then 3 refusals: not the 40 scripted steps
    assert kit.models["reviewer"].remaining == 0
    assert [r["stopped"] for r in limits(events)] == [False, False, True]
    assert sorted(kit.memory.sessions()) == [f"main/reviewer#{i}" for i in (1, 2, 3)]
    assert_nothing_left(kit)


async def test_the_concurrent_cap_counts_open_sessions(kit: Kit) -> None:
    kit.manager.caps.limits = FanOutLimits(concurrent=2)
    kit.models["reviewer"].add("a here", "b here", "c here")
    main = ScriptedModel(
        [
            call_tool("SubAgent", delegate("hi", interactive=True, instance="a")),
            call_tool("SubAgent", delegate("hi", interactive=True, instance="b")),
            call_tool("SubAgent", delegate("hi", interactive=True, instance="c")),
            call_tool("UnloadSubAgent", {"role": "reviewer", "instance": "a"}),
            call_tool("SubAgent", delegate("hi", interactive=True, instance="c")),
            "done",
        ]
    )
    events: list[Event] = []
    out = await run_main(kit, main, events)
    assert out.content == "done"
    refused = results(main)[2]
    assert "2 sub-agent sessions are open" in refused
    assert "max_concurrent_subagents=2" in refused
    assert results(main)[4].startswith("c here")  # one ended: room for another
    assert [r["limit"] for r in limits(events)] == ["concurrent_subagents"]
    assert_nothing_left(kit)


async def test_the_same_task_again_gets_a_note_then_stops_the_turn(kit: Kit) -> None:
    kit.models["reviewer"].add("looks fine", "still fine")
    again = call_tool("SubAgent", delegate("review main.py"))
    main = ScriptedModel([again, call_tool("Echo", {"text": "x"}), again, again, again, "no"])
    events: list[Event] = []
    out = await run_main(kit, main, events)
    assert kit.models["reviewer"].remaining == 0  # run twice; the third time was not
    note = results(main)[3]
    assert note.startswith("Not run: you delegated this same task to 'reviewer' 3 times")
    assert "once more stops your turn" in note
    assert out.stop_reason == "repeated_call"
    assert out.content.startswith("Stopped: the agent delegated the same task to 'reviewer' 4")
    assert main.remaining == 1  # the answer scripted after the loop was never asked for
    assert [(r["limit"], r["stopped"]) for r in limits(events)] == [
        ("repeated_delegation", False),
        ("repeated_delegation", True),
    ]
    assert_nothing_left(kit)


async def test_another_task_in_between_breaks_the_row(kit: Kit) -> None:
    kit.models["reviewer"].add(*(f"r{i}" for i in range(5)))
    same, other = delegate("review a.py"), delegate("review b.py")
    steps = [call_tool("SubAgent", a) for a in (same, same, other, same, same)]
    main = ScriptedModel([*steps, "done"])
    events: list[Event] = []
    out = await run_main(kit, main, events)
    assert out.content == "done"
    assert results(main) == [f"r{i}" for i in range(5)]
    assert limits(events) == []


async def test_the_depth_limit_is_reported_as_a_limit(tmp_path: Path) -> None:
    from subagent_kit import make_kit

    kit = make_kit(tmp_path, "reviewer", max_depth=0)
    main = ScriptedModel([call_tool("SubAgent", delegate("x")), "done"])
    events: list[Event] = []
    await run_main(kit, main, events)
    assert "nesting depth limit 0" in results(main)[0]
    assert [(r["limit"], r["value"]) for r in limits(events)] == [("depth", 0)]


async def test_the_span_of_the_refused_call_says_which_limit(kit: Kit) -> None:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from retinue.telemetry import trace as tel

    exporter, provider = InMemorySpanExporter(), TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    kit.manager.caps.limits = FanOutLimits(per_run=1)
    kit.models["reviewer"].add("ok")
    main = ScriptedModel(
        [call_tools(("SubAgent", delegate("a")), ("SubAgent", delegate("b"))), "d"]
    )
    tel.enable(provider)
    try:
        await run_main(kit, main, [])
    finally:
        tel.disable()
        provider.shutdown()
    marked = [
        s for s in exporter.get_finished_spans() if "retinue.limit.name" in (s.attributes or {})
    ]
    assert len(marked) == 1
    attributes = marked[0].attributes or {}
    assert marked[0].name == "execute_tool SubAgent"
    assert attributes["retinue.limit.name"] == "subagents_per_run"
    assert attributes["retinue.limit.value"] == 1
    assert attributes["retinue.limit.stopped"] is False


async def test_runs_and_conversations_are_counted_apart(tmp_path: Path) -> None:
    """Through a runtime's conversation: the run count starts again with each message, the
    conversation's goes on, and a new conversation starts from nothing."""
    agents = tmp_path / ".retinue" / "agents"
    agents.mkdir(parents=True)
    (agents / "helper.md").write_text(
        "---\nname: helper\ndescription: Helps.\nmodel: scripted:helper\n---\nYou help.\n"
    )
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        "max_subagents_per_run = 2\nmax_subagents_per_conversation = 3\n"
    )
    settings = Settings.load(home=home, workspace=tmp_path)
    helper = ScriptedModel(name="scripted:helper")
    helper.add(*(f"helped {i}" for i in range(5)))
    ask = call_tools(*(("SubAgent", delegate(f"t{i}", "helper")) for i in range(3)))
    main = ScriptedModel([ask, "one", ask, "two", ask, "three"])
    runtime = Runtime.create(settings, model=main, model_for=lambda _s: helper, with_memory=False)
    conversation = runtime.conversation()
    first = await conversation.send("go")
    assert first.content == "one"
    told = results(main)
    assert told[:2] == ["helped 0", "helped 1"] and "max_subagents_per_run=2" in told[2]
    await conversation.send("again")
    told = results(main)[3:]
    assert told[0] == "helped 2"  # a new run: two more allowed, but the conversation's third
    assert "max_subagents_per_conversation=3" in told[1]
    await conversation.reset()  # /new: a new conversation
    await conversation.send("once more")
    assert results(main)[:2] == ["helped 3", "helped 4"]
    await conversation.close()
    assert runtime.manager.registry.held_by() == []


async def test_refusals_that_stop_a_turn_are_counted_per_agent(tmp_path: Path) -> None:
    """A sub-agent refused once and its parent refused twice: three refusals in the tree,
    but no agent was refused three times, so no turn stops."""
    from subagent_kit import make_kit

    kit = make_kit(tmp_path, ("reviewer", frozenset({"spawn_agent"})), "tester")
    kit.manager.caps.limits = FanOutLimits(per_run=2)
    kit.models["reviewer"].add(
        call_tool("SubAgent", delegate("test a", "tester")),
        call_tool("SubAgent", delegate("test b", "tester")),  # refused: the run's third
        "reviewed",
    )
    kit.models["tester"].add("a passes")
    main = ScriptedModel(
        [
            call_tool("SubAgent", delegate("review it")),
            call_tool("SubAgent", delegate("test c", "tester")),
            call_tool("SubAgent", delegate("test d", "tester")),
            "done",
        ]
    )
    events: list[Event] = []
    out = await run_main(kit, main, events)
    assert out.content == "done"
    assert [(e.agent_id, e.data["stopped"]) for e in events if e.kind == LIMIT_REACHED] == [
        ("main/reviewer#1", False),
        ("main", False),
        ("main", False),
    ]
    assert_nothing_left(kit)


async def test_a_run_without_a_session_counts_from_nothing_each_time(kit: Kit) -> None:
    """A program's own loop (run() inside manager.owner()): the run count ends with the
    block, as a conversation's ends with its turn."""
    kit.manager.caps.limits = FanOutLimits(per_run=1, per_conversation=2)
    kit.models["reviewer"].add("first", "second")
    for n in (1, 2):
        main = ScriptedModel([call_tool("SubAgent", delegate("review it")), "done"])
        await run_main(kit, main, [])
        assert results(main) == [("first", "second")[n - 1]]
    main = ScriptedModel([call_tool("SubAgent", delegate("review it")), "done"])
    await run_main(kit, main, [])
    assert "max_subagents_per_conversation=2" in results(main)[0]
