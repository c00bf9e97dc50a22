"""A session's turn that asks (the main agent's question goes to whoever sends it messages:
the user) and one that is steered, at the level of the session primitive."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import pytest

from retinue.engine import RunConfig
from retinue.engine.session import Consolidation, Lifecycle, Session
from retinue.errors import SessionError
from retinue.llm.base import ToolSpec
from retinue.messages import (
    AssistantMessage,
    Message,
    ToolResultMessage,
    UserMessage,
    history_problems,
)
from retinue.subagents.tools import ask_parent
from retinue.testing import ScriptedModel, call_tool, call_tools
from retinue.tools import ToolContext, ToolRegistry

pytestmark = pytest.mark.timeout(60)  # a hang bound, not a timing


def ask(question: str) -> AssistantMessage:
    return call_tool("AskParent", {"question": question})


def make_session(
    tmp_path: Path, model: ScriptedModel, consolidated: list[int] | None = None
) -> Session:
    ctx = ToolContext("main", tmp_path, tmp_path)
    config = RunConfig(model, [], ToolRegistry([ask_parent]), ctx)

    async def consolidate(messages: Sequence[Message]) -> Consolidation:
        assert consolidated is not None
        consolidated.append(len(messages))
        return "done"

    lifecycle = Lifecycle(consolidate=consolidate if consolidated is not None else None)
    return Session("main", config, lifecycle)


def answered(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
    result = next(m for m in reversed(messages) if isinstance(m, ToolResultMessage))
    return f"going with {result.content}"


async def test_the_users_next_message_answers_the_main_agents_question(tmp_path: Path) -> None:
    model = ScriptedModel([ask("which port?"), answered])
    session = make_session(tmp_path, model)
    out = await session.send("set up the server")
    assert out.asking and out.content == "which port?"
    assert session.state == "asking" and session.question == "which port?"
    out = await session.send("8080")
    assert out.stop_reason == "final" and out.content == "going with 8080"
    assert session.state == "idle" and session.turns == 1
    assert sum(isinstance(m, UserMessage) for m in session.messages) == 1
    assert not history_problems(session.messages)


async def test_interrupt_and_close_while_asking(tmp_path: Path) -> None:
    consolidated: list[int] = []
    model = ScriptedModel([ask("first?"), "after the interrupt", ask("second?")])
    session = make_session(tmp_path, model, consolidated)
    assert (await session.send("one")).asking
    assert session.interrupt()
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert session.state == "idle" and session.collect() == [
        "[turn of main interrupted; the session is kept]"
    ]
    assert not history_problems(session.messages)
    out = await session.send("two")  # not an answer any more: a new turn
    assert out.content == "after the interrupt"
    assert (await session.send("three")).asking
    assert await session.close() == "done"
    assert await session.close() == "done"
    assert len(consolidated) == 1 and session.state == "closed"


async def test_a_cancelled_answer_takes_its_turn_down(tmp_path: Path) -> None:
    model = ScriptedModel([ask("q?")])
    session = make_session(tmp_path, model)
    assert (await session.send("go")).asking
    model.add("never seen")
    model.delay = 10  # the resumed turn is cancelled while it waits for the model
    waiter = asyncio.create_task(session.send("a"))
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert session.state == "idle" and session.tasks() == set()
    assert not history_problems(session.messages)


async def test_one_question_at_a_time_and_none_outside_a_turn(tmp_path: Path) -> None:
    model = ScriptedModel(
        [call_tools(("AskParent", {"question": "a?"}), ("AskParent", {"question": "b?"}))]
    )
    session = make_session(tmp_path, model)
    out = await session.send("go")
    assert out.asking and out.content == "a?"
    model.add("fine")
    out = await session.send("yes")
    results = [m for m in session.messages if isinstance(m, ToolResultMessage)]
    assert [r.is_error for r in results] == [False, True]
    assert "one question at a time" in results[1].content
    with pytest.raises(SessionError, match="no running turn"):
        await session.ask("outside?")


async def test_steering_between_tool_calls(tmp_path: Path) -> None:
    session_ref: list[Session] = []

    def steer_now(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> AssistantMessage:
        assert session_ref[0].steer("stop after this")
        return call_tool("Nope")  # an unknown tool: an error result, then the next step

    model = ScriptedModel([steer_now, "stopped"])
    session = make_session(tmp_path, model)
    session_ref.append(session)
    out = await session.send("go")
    assert out.content.startswith("stopped") and "1 steering message(s)" in out.content
    request = model.calls[-1].messages
    assert isinstance(request[-1], UserMessage) and "stop after this" in request[-1].content
    assert not session.steer("too late")  # nothing runs: nothing done


async def test_steering_on_the_last_iteration_leaves_the_history_valid(tmp_path: Path) -> None:
    session_ref: list[Session] = []

    def steer_now(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        assert session_ref[0].steer("one more thing")
        return "the end"

    model = ScriptedModel([steer_now, "next turn"])
    session = make_session(tmp_path, model)
    session.config.max_iterations = 1
    session_ref.append(session)
    out = await session.send("go")
    assert out.content == "the end" and not history_problems(session.messages)
    out = await session.send("again")  # the steering the model never saw comes with it
    assert out.content.startswith("next turn") and "1 steering message(s)" in out.content
    [request] = model.calls[-1:]
    assert request.messages[-1].content.startswith("again")
    assert "one more thing" in request.messages[-1].content
    assert not history_problems(session.messages)


async def test_steering_sent_as_the_turn_starts_reaches_its_first_model_call(
    tmp_path: Path,
) -> None:
    model = ScriptedModel(["on port 8080"])  # one call only: a second would be unscripted
    session = make_session(tmp_path, model)

    def steer() -> None:  # as the turn's time comes, before it does anything
        assert session.steer("use 8080")

    out = await session.send("set up the server", on_start=steer)
    assert out.stop_reason == "final" and out.content.startswith("on port 8080")
    assert "1 steering message(s)" in out.content
    [request] = model.calls
    turn = request.messages[-1]  # the turn's message and the steering, one user message
    assert isinstance(turn, UserMessage) and turn.content.startswith("set up the server")
    assert "use 8080" in turn.content
    assert not history_problems(session.messages)


async def test_steering_sent_just_before_an_interrupt_goes_with_the_next_turn(
    tmp_path: Path,
) -> None:
    model = ScriptedModel(["never said"], delay=10)
    session = make_session(tmp_path, model)
    waiter = asyncio.create_task(session.send("look around"))
    while model.call_count < 1:
        await asyncio.sleep(0)
    assert session.steer("also look in tests/")
    assert session.interrupt()
    out = await waiter
    assert out.stop_reason == "interrupted"
    assert "1 steering message(s) not seen yet, kept for its next turn" in out.content
    assert not history_problems(session.messages)
    model.delay = 0
    model.add("tests/ has it")
    out = await session.send("go on")
    assert out.content.startswith("tests/ has it") and "1 steering message(s)" in out.content
    turn = model.calls[-1].messages[-1]
    assert turn.content.startswith("go on") and "also look in tests/" in turn.content
    assert not history_problems(session.messages)


async def test_steering_is_dropped_when_the_session_closes(tmp_path: Path) -> None:
    model = ScriptedModel(["never said"], delay=10)
    session = make_session(tmp_path, model)
    waiter = asyncio.create_task(session.send("look around"))
    while model.call_count < 1:
        await asyncio.sleep(0)
    assert session.steer("also look in tests/")
    await session.close()
    assert "steering" not in (await waiter).content and session.state == "closed"


async def test_a_question_reports_the_tokens_its_turn_used_so_far(tmp_path: Path) -> None:
    model = ScriptedModel([ask("which port?"), ask("which host?"), answered])
    session = make_session(tmp_path, model)
    out = await session.send("set up the server")
    assert out.asking and out.usage.requests == 1 and out.usage.input_tokens > 0
    assert out.usage == session.usage  # the only turn so far
    out = await session.send("8080")  # the same turn goes on: its usage so far
    assert out.asking and out.usage.requests == 2 and out.usage == session.usage
    out = await session.send("localhost")
    assert out.stop_reason == "final" and out.usage.requests == 3
    before = session.usage
    model.add(ask("and the TLS certificate?"))
    out = await session.send("one more thing")  # a new turn: its own usage only
    assert out.asking and out.usage.requests == 1
    assert out.usage.input_tokens == session.usage.input_tokens - before.input_tokens


async def test_a_send_waiting_behind_a_background_turn_that_asks_gets_the_question(
    tmp_path: Path,
) -> None:
    """The send would otherwise wait for ever: the turn ahead of it waits for an answer that
    can only come after it. Its message is withdrawn (it says so); the next one answers."""
    model = ScriptedModel([ask("which port?"), answered], delay=0.2)
    session = make_session(tmp_path, model)
    session.start("set up the server")  # a background turn: nobody waits for its question
    await asyncio.sleep(0)
    out = await asyncio.wait_for(session.send("and use TLS"), 30)
    assert out.asking and out.content.startswith("which port?\n[your message was not delivered")
    assert session.question == "which port?"
    assert all("TLS" not in m.content for m in session.messages)  # withdrawn, not queued
    done = await asyncio.wait_for(session.send("8080"), 30)
    assert done.stop_reason == "final" and done.content == "going with 8080"
    assert not history_problems(session.messages) and session.tasks() == set()
