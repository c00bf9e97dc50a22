"""Two-way sessions (issue 17): a sub-agent asks its parent and goes on in place; a parent
steers a working session between its tool calls."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from subagent_kit import Kit, make_kit

from retinue.llm.base import ToolSpec
from retinue.messages import (
    AssistantMessage,
    Message,
    ToolResultMessage,
    UserMessage,
    history_problems,
)
from retinue.subagents.roles import parse_role
from retinue.testing import ScriptedModel, call_tool
from retinue.tools import ToolContext, tool

pytestmark = pytest.mark.timeout(60)  # a hang bound, not a timing

ASKS = frozenset({"ask_parent"})
SPAWNS = frozenset({"spawn_agent"})


def ask(question: str) -> AssistantMessage:
    return call_tool("AskParent", {"question": question})


def kinds(messages: Sequence[Message]) -> list[str]:
    return [type(m).__name__ for m in messages]


def last_result(messages: Sequence[Message]) -> str:
    return next(m.content for m in reversed(messages) if isinstance(m, ToolResultMessage))


def results(messages: Sequence[Message]) -> list[ToolResultMessage]:
    return [m for m in messages if isinstance(m, ToolResultMessage)]


async def test_the_answer_returns_inside_the_same_turn(kit: Kit) -> None:
    seen: list[str] = []

    def finish(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        seen.append(last_result(messages))
        return f"reviewed {seen[-1]}"

    kit.models["reviewer"].add(ask("which file?"), finish)
    m, ctx = kit.manager, kit.ctx()
    question = await m.interactive_subagent(ctx, "review the change", "reviewer")
    assert question.asking and question.content == "which file?"
    info = m.session("main/reviewer")
    assert info is not None and info.state == "asking" and info.turns == 0
    session = m.registry.by_id("main/reviewer").session  # type: ignore[union-attr]
    (turn,) = session.tasks()

    out = await m.interactive_subagent(ctx, "a.py", "reviewer")
    assert out.waiting_for_input and out.content == "reviewed a.py" and seen == ["a.py"]
    assert turn.done() and turn.result() is out  # the same turn went on: no new one
    assert session.turns == 1 and session.state == "idle"
    # one user message (the task); the answer came back as AskParent's result
    assert kinds(session.messages) == [
        "SystemMessage",
        "UserMessage",
        "AssistantMessage",
        "ToolResultMessage",
        "AssistantMessage",
    ]
    await m.unload_subagent("main", "reviewer")
    assert kit.memory.sessions() == ["main/reviewer"]


async def test_the_parent_reads_a_marked_question_and_answers_with_subagent(kit: Kit) -> None:
    kit.models["reviewer"].add(ask("tabs or spaces?"), "spaces it is")
    main = ScriptedModel(name="scripted:main")
    main.add(
        call_tool("SubAgent", {"task": "format it", "role": "reviewer", "interactive": True}),
        call_tool("SubAgent", {"task": "spaces", "role": "reviewer", "interactive": True}),
        "done",
    )
    out = await kit.run_main(main, "go")
    asked, answered = results(out.messages)
    assert asked.content.startswith("[session main/reviewer asks: tabs or spaces?]")
    assert "interactive=true, task=<your answer>" in asked.content
    assert answered.content.startswith("spaces it is")
    assert kit.memory.sessions() == ["main/reviewer"]  # the run's end consolidated it once


async def test_a_one_shot_that_asks_stays_until_answered(tmp_path: Path) -> None:
    k = make_kit(tmp_path, ("reviewer", ASKS), "main")
    k.models["reviewer"].add(ask("which branch?"), "merged dev")
    k.models["main"].add(
        call_tool("SubAgent", {"task": "merge it", "role": "reviewer"}),
        call_tool("SubAgent", {"task": "dev", "role": "reviewer", "interactive": True}),
        "done",
    )
    out = await k.run_main(k.models["main"], "go")
    asked, answered = results(out.messages)
    assert asked.content.startswith("[session main/reviewer#1 asks: which branch?]")
    assert answered.content.startswith("merged dev")
    assert k.memory.sessions() == ["main/reviewer#1"] and k.manager.sessions() == []
    (_, _, history) = k.memory.consolidated[0]
    assert not history_problems(history)
    assert sum(isinstance(m, UserMessage) for m in history) == 1


async def test_a_one_shot_that_asks_is_held_and_its_question_shown(tmp_path: Path) -> None:
    k = make_kit(tmp_path, ("reviewer", ASKS))
    k.models["reviewer"].add(ask("which branch?"))
    m, ctx = k.manager, k.ctx()
    out = await m.run_subagent(ctx, "merge it", "reviewer")
    assert out.asking and out.content == "which branch?"
    (info,) = m.sessions("main")
    assert (info.id, info.state) == ("main/reviewer#1", "asking")
    # a one-shot without the capability is not offered AskParent
    plain = make_kit(tmp_path, "reviewer")
    plain.models["reviewer"].add("ok")
    await plain.manager.run_subagent(plain.ctx(), "t", "reviewer")
    assert "AskParent" not in plain.models["reviewer"].calls[0].tool_names
    await m.cleanup("main")
    assert k.memory.sessions() == ["main/reviewer#1"]


async def test_unload_while_a_question_is_pending_consolidates_once(kit: Kit) -> None:
    kit.models["reviewer"].add(ask("may I delete it?"))
    m, ctx = kit.manager, kit.ctx()
    out = await m.interactive_subagent(ctx, "clean up", "reviewer")
    assert out.asking
    confirmation = await m.unload_subagent("main", "reviewer")
    assert "ended after 0 turn(s)" in confirmation
    assert kit.memory.sessions() == ["main/reviewer"]
    (_, _, history) = kit.memory.consolidated[0]
    assert not history_problems(history)
    # the unanswered question stays in the history, its call closed as cancelled
    call = next(m for m in history if isinstance(m, AssistantMessage) and m.tool_calls)
    assert "may I delete it?" in call.tool_calls[0].arguments
    assert "cancelled" in results(history)[0].content
    await m.cleanup("main")  # nothing left, nothing twice
    assert kit.memory.sessions() == ["main/reviewer"]


async def test_a_pending_question_ends_with_its_parents_run(kit: Kit) -> None:
    kit.models["reviewer"].add(ask("which one?"))
    main = ScriptedModel(name="scripted:main")
    main.add(
        call_tool("SubAgent", {"task": "pick", "role": "reviewer", "interactive": True}),
        "never mind",
    )
    await kit.run_main(main, "go")
    assert kit.memory.sessions() == ["main/reviewer"] and kit.manager.sessions() == []


def relay(role: str) -> Callable[[Sequence[Message], Sequence[ToolSpec]], AssistantMessage]:
    """A step: send the last tool result (an answer) on to the session of ``role``."""

    def step(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> AssistantMessage:
        task = last_result(messages)
        return call_tool("SubAgent", {"task": task, "role": role, "interactive": True})

    return step


def pass_up(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> AssistantMessage:
    """A step: ask the parent the question a child asked (the last tool result)."""
    question = last_result(messages).split(" asks: ", 1)[1].split("]", 1)[0]
    return ask(question)


async def test_a_question_passes_up_three_levels_and_the_answer_comes_down(
    tmp_path: Path,
) -> None:
    k = make_kit(tmp_path, ("a", SPAWNS), ("b", SPAWNS), "c")
    k.models["a"].add(
        call_tool("SubAgent", {"task": "work", "role": "b", "interactive": True}),
        pass_up,
        relay("b"),
        lambda ms, ts: f"a: {last_result(ms).split(chr(10))[0]}",
    )
    k.models["b"].add(
        call_tool("SubAgent", {"task": "work", "role": "c", "interactive": True}),
        pass_up,
        relay("c"),
        lambda ms, ts: f"b: {last_result(ms).split(chr(10))[0]}",
    )
    k.models["c"].add(ask("the port?"), lambda ms, ts: f"c uses {last_result(ms)}")
    m, ctx = k.manager, k.ctx()
    question = await m.interactive_subagent(ctx, "start", "a")
    assert question.asking and question.content == "the port?"
    states = {s.id: s.state for s in m.sessions()}
    assert states == {"main/a": "asking", "main/a/b": "asking", "main/a/b/c": "asking"}
    out = await m.interactive_subagent(ctx, "8080", "a")
    assert out.content == "a: b: c uses 8080"
    assert {s.id: s.state for s in m.sessions()} == dict.fromkeys(states, "idle")
    for sid in states:  # each level: one turn, one user message (its task)
        history = m.history(sid)
        assert sum(isinstance(x, UserMessage) for x in history) == 1, sid
    await m.cleanup("main")
    assert sorted(k.memory.sessions()) == sorted(states)


async def test_a_background_turn_that_asks_shows_its_question_to_poll(kit: Kit) -> None:
    kit.models["reviewer"].add(ask("now?"), "later done")
    m, ctx = kit.manager, kit.ctx()
    m.start_background(ctx, "work", "reviewer")
    status = await m.poll(ctx, "reviewer", wait=True)  # returns on the question, no hang
    assert "asking" in status and "[session main/reviewer asks: now?]" in status
    m.start_background(ctx, "yes", "reviewer")  # the answer; the turn goes on
    status = await m.poll(ctx, "reviewer", wait=True)
    assert "later done" in status and m.session("main/reviewer").turns == 1  # type: ignore[union-attr]
    await m.cleanup("main")


def gate_kit(tmp_path: Path) -> tuple[Kit, asyncio.Event, asyncio.Event]:
    """A kit whose ``Gate`` tool waits until the test opens it (``entered`` tells it began)."""
    entered, opened = asyncio.Event(), asyncio.Event()

    @tool("Gate")
    async def gate(ctx: ToolContext) -> str:
        """Wait at the gate."""
        entered.set()
        await opened.wait()
        return "through"

    return make_kit(tmp_path, "reviewer", extra_tools=[gate]), entered, opened


async def test_steering_reaches_a_running_child_before_its_next_model_call(
    tmp_path: Path,
) -> None:
    k, entered, opened = gate_kit(tmp_path)
    model = k.models["reviewer"]
    model.add(call_tool("Gate"), "narrowed to a.py")
    m, ctx = k.manager, k.ctx()
    m.start_background(ctx, "review everything", "reviewer")
    await entered.wait()  # its turn is inside a tool call
    ack = await m.steer(ctx, task="only a.py, please", role="reviewer")
    assert ack.startswith("[steering delivered to session main/reviewer")
    opened.set()
    status = await m.poll(ctx, "reviewer", wait=True)
    assert "narrowed to a.py" in status and "1 steering message(s) received" in status
    seen = model.calls[-1].messages  # the next request: tool result, then the steering
    assert isinstance(seen[-2], ToolResultMessage) and seen[-2].content == "through"
    assert isinstance(seen[-1], UserMessage) and "only a.py, please" in seen[-1].content
    assert not history_problems(m.history("main/reviewer"))
    await m.cleanup("main")


async def test_steering_that_arrives_with_a_final_answer_is_still_seen(kit: Kit) -> None:
    session_box: list[object] = []

    def answer_while_steered(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        held = kit.manager.registry.by_id("main/reviewer")
        assert held is not None and held.session.steer("also check b.py")
        session_box.append(held)
        return "a.py is fine"

    kit.models["reviewer"].add(answer_while_steered, "a.py and b.py are fine")
    out = await kit.manager.interactive_subagent(kit.ctx(), "check a.py", "reviewer")
    assert out.content.startswith("a.py and b.py are fine")
    assert "1 steering message(s) received" in out.content
    history = kit.manager.history("main/reviewer")
    assert kinds(history)[-3:] == ["AssistantMessage", "UserMessage", "AssistantMessage"]
    assert not history_problems(history)


async def test_steering_an_idle_session_sends_a_usual_message(kit: Kit) -> None:
    kit.models["reviewer"].add("first", "second")
    m, ctx = kit.manager, kit.ctx()
    await m.interactive_subagent(ctx, "one", "reviewer")
    reply = await m.steer(ctx, task="two", role="reviewer")
    assert reply.startswith("second") and "waiting for your next message" in reply


async def test_steering_a_session_that_asks_answers_it(kit: Kit) -> None:
    kit.models["reviewer"].add(ask("sure?"), "went on")
    m, ctx = kit.manager, kit.ctx()
    assert (await m.interactive_subagent(ctx, "go", "reviewer")).asking
    ack = await m.steer(ctx, task="yes", role="reviewer")
    assert "your message is its answer" in ack
    status = await m.poll(ctx, "reviewer", wait=True)
    assert "went on" in status


def test_the_ask_parent_capability_reads_from_a_role_file(tmp_path: Path) -> None:
    text = "---\nname: asker\ndescription: Asks.\ncapabilities: [ask_parent]\n---\nAsk.\n"
    role = parse_role(tmp_path / "asker.md", text)
    assert role.can("ask_parent") and not role.notes
    tools = make_kit(tmp_path).manager.factory.tools_for(role)
    assert "AskParent" in tools.names


async def test_status_shows_the_question_of_a_session_that_asked_its_caller(kit: Kit) -> None:
    kit.models["reviewer"].add(ask("which file?"))
    m, ctx = kit.manager, kit.ctx()
    assert (await m.interactive_subagent(ctx, "review", "reviewer")).asking
    status = await m.poll(ctx, "reviewer", wait=True)
    assert status.startswith("Session main/reviewer: asking ([session main/reviewer asks: which")
    await m.cleanup("main")


async def test_a_child_answers_its_own_childs_question(tmp_path: Path) -> None:
    k = make_kit(tmp_path, ("a", SPAWNS), "b")
    k.models["b"].add(ask("red or blue?"), lambda ms, ts: f"painted {last_result(ms)}")
    k.models["a"].add(
        call_tool("SubAgent", {"task": "paint", "role": "b", "interactive": True}),
        call_tool("SubAgent", {"task": "blue", "role": "b", "interactive": True}),
        lambda ms, ts: f"b says: {last_result(ms).splitlines()[0]}",
    )
    out = await k.manager.interactive_subagent(k.ctx(), "get it painted", "a")
    assert out.content == "b says: painted blue"  # main was never asked
    await k.manager.cleanup("main")
    assert sorted(k.memory.sessions()) == ["main/a", "main/a/b"]
