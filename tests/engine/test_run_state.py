"""A run's configuration and its state are two values: ``run_turn(config, state)`` extends
the state's history in place and leaves the configuration as it was, so one configuration
serves several histories; a session keeps its own state (``run_state``). The form before
the split, ``RunConfig(model, messages, tools, context)``, still works for one release."""

from __future__ import annotations

from pathlib import Path

import pytest

from retinue.engine import RunConfig, RunState, run_turn
from retinue.engine.session import Session
from retinue.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolResultMessage,
    UserMessage,
)
from retinue.testing import ScriptedModel, call_tool
from retinue.tools import ToolContext, ToolRegistry, tool


@tool("Noop")
async def noop(ctx: ToolContext) -> str:
    """Does nothing."""
    return "ok"


def _config(tmp_path: Path, model: ScriptedModel) -> RunConfig:
    ctx = ToolContext("main", tmp_path, tmp_path)
    return RunConfig(model=model, tools=ToolRegistry([noop]), context=ctx)


async def test_one_config_runs_two_histories_each_extended_in_place(tmp_path: Path) -> None:
    model = ScriptedModel([call_tool("Noop", {}), "first done", "second done"])
    config = _config(tmp_path, model)
    first = RunState([SystemMessage("s"), UserMessage("one")])
    second = RunState([SystemMessage("s"), UserMessage("two")])
    out = await run_turn(config, first)
    assert out.content == "first done" and out.messages is first.messages
    assert [m.role for m in first.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert (await run_turn(config, second)).content == "second done"
    assert [m.content for m in second.messages] == ["s", "two", "second done"]
    assert model.calls[2].messages[-1].content == "two"  # (the second run saw only its own)
    assert config.history is None  # the configuration holds no history


async def test_the_form_before_the_split_runs_on_the_configs_messages(tmp_path: Path) -> None:
    history: list[Message] = [UserMessage("go")]
    ctx = ToolContext("main", tmp_path, tmp_path)
    config = RunConfig(ScriptedModel(["done"]), history, ToolRegistry([noop]), ctx)
    out = await run_turn(config)
    assert out.messages is history is config.messages
    assert isinstance(history[-1], AssistantMessage) and history[-1].content == "done"


def test_a_config_needs_its_tools_and_context(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="tools and context"):
        RunConfig(ScriptedModel(), [])


async def test_a_session_keeps_its_own_state_turn_after_turn(tmp_path: Path) -> None:
    model = ScriptedModel([call_tool("Noop", {}), "one", "two"])
    state = RunState()
    session = Session("main", _config(tmp_path, model), state=state)
    try:
        await session.send("a")
        await session.send("b")
    finally:
        await session.close()
    assert session.run_state is state and session.messages is state.messages
    assert [m.content for m in state.messages if isinstance(m, UserMessage)] == ["a", "b"]
    assert sum(isinstance(m, ToolResultMessage) for m in state.messages) == 1
    assert session.config.history is None


async def test_a_session_made_the_old_way_keeps_the_configs_history(tmp_path: Path) -> None:
    history: list[Message] = [SystemMessage("s")]
    ctx = ToolContext("main", tmp_path, tmp_path)
    config = RunConfig(ScriptedModel(["hi"]), history, ToolRegistry([]), ctx)
    session = Session("main", config)
    try:
        await session.send("hello")
    finally:
        await session.close()
    assert session.messages is history
    assert [m.content for m in history] == ["s", "hello", "hi"]


async def test_a_revived_turn_ends_no_children_and_the_next_sent_turn_does(
    tmp_path: Path,
) -> None:
    """``start_resume`` (a turn that was running when its process stopped, going on) keeps
    the children revived with it; a turn sent afterwards ends them as ``children_per_turn``
    says (the durable service's approval-after-a-dead-worker case)."""
    import asyncio

    from retinue.engine.session import Lifecycle

    ended: list[str] = []

    async def end_children() -> None:
        ended.append("ended")

    model = ScriptedModel(["went on", "second"])
    lifecycle = Lifecycle(end_children=end_children, children_per_turn=True)
    session = Session("main", _config(tmp_path, model), lifecycle)
    session.restore_state([SystemMessage("s"), UserMessage("one")])
    await asyncio.wait_for(session.start_resume(), 30)
    assert ended == [] and session.last_reply == "went on"
    await session.send("two")
    assert ended == ["ended"]


async def test_a_revived_turn_closed_before_it_went_on_leaves_a_valid_history(
    tmp_path: Path,
) -> None:
    """Found by the durable fuzz (2 kills, interrupts): a restored history ends with the
    cut turn's user message; its resumed turn, cancelled by a close while the system prompt
    renders, never began, and the history was consolidated ending in that message."""
    import asyncio

    from retinue.engine.session import Lifecycle
    from retinue.messages import history_problems

    rendering, consolidated = asyncio.Event(), []

    async def slow_prompt() -> str:
        rendering.set()
        await asyncio.Event().wait()  # never: the close cancels it
        return "s"

    async def consolidate(messages: list[Message]) -> str:
        consolidated.append(list(messages))
        return "ok"

    lifecycle = Lifecycle(system_prompt=slow_prompt, consolidate=consolidate)  # type: ignore[arg-type]
    session = Session("a", _config(tmp_path, ScriptedModel([])), lifecycle)
    session.restore_state([SystemMessage("s"), UserMessage("one")])
    session.start_resume()
    await asyncio.wait_for(rendering.wait(), 30)
    await asyncio.wait_for(session.close(), 30)
    [history] = consolidated
    assert history_problems(history) == [], history
    assert isinstance(history[-1], AssistantMessage)
