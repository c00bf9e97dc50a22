"""Context editing (``engine.context_edit``), the stage before a summary: old tool results
become stubs (calls and pairing kept), settled reasoning goes, the turn in progress keeps its
own; in a run it spares the summary call, and an emulated Claude Fable 5.2 never refuses a
request it edited mid tool loop."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from retinue.config import Settings
from retinue.engine import RunConfig, run
from retinue.engine.compress import AutoCompressor, is_summary
from retinue.engine.context_edit import ContextEdit, clear_context, configured_edit, is_cleared
from retinue.errors import ConfigError, ContextTooLongError
from retinue.events import COMPRESSED, Event
from retinue.llm.anthropic import AnthropicModel
from retinue.llm.base import ToolSpec
from retinue.llm.loopback_anthropic import LoopbackAnthropicServer
from retinue.llm.tokens import estimate_tokens
from retinue.messages import (
    AssistantMessage,
    Message,
    ReasoningPart,
    SystemMessage,
    ToolResultMessage,
    UserMessage,
    history_problems,
)
from retinue.testing import ScriptedModel, call_tool
from retinue.tools.base import ToolContext, ToolRegistry, tool

BIG = "line of a big file\n" * 200  # ~3,800 characters


def thought(n: int) -> ReasoningPart:
    return ReasoningPart("anthropic", "claude-fable-5-2", "thinking", {"signature": f"S{n}"}, "t")


def session(turns: int) -> list[Message]:
    """``turns`` finished turns, each: question, a read with its big result, an answer."""
    out: list[Message] = [SystemMessage("You review code.")]
    for i in range(turns):
        call = call_tool("read", {"path": f"f{i}.py"}, id=f"c{i}")
        out += [
            UserMessage(f"question {i}"),
            AssistantMessage("", call.tool_calls, (thought(i),)),
            ToolResultMessage(f"c{i}", "read", f"file {i}\n" + BIG),
            AssistantMessage(f"answer {i}", (), (thought(100 + i),)),
        ]
    return out


def test_old_results_become_stubs_and_the_newest_stay() -> None:
    history = session(5)
    out, result = clear_context(history, keep_tool_results=2)
    results = [m for m in out if isinstance(m, ToolResultMessage)]
    assert [is_cleared(m) for m in results] == [True, True, True, False, False]
    assert result.cleared_results == 3 and result.freed_tokens > 2_500
    stub = results[0]
    assert stub.tool_call_id == "c0" and "repeat the read call" in stub.content
    size = len(history[3].content)
    assert f"({size} characters)" in stub.content
    # every call keeps its result, right after it: the history is still one a model takes
    assert history_problems(out) == []
    assert [m.tool_calls for m in out if isinstance(m, AssistantMessage)] == [
        m.tool_calls for m in history if isinstance(m, AssistantMessage)
    ]
    few, nothing = clear_context(session(2), keep_tool_results=3)
    assert nothing.cleared_results == 0 and not any(is_cleared(m) for m in few)
    again, second = clear_context(out, keep_tool_results=2)
    assert again == out and second.cleared_results == 0 and second.freed_tokens == 0


def test_unread_results_and_the_loop_in_progress_keep_everything() -> None:
    history = session(3)
    calls = call_tool("read", {"path": "new.py"}, id="n1")
    more = call_tool("read", {"path": "x.py"}, id="n2")
    history += [
        UserMessage("and now new.py"),
        AssistantMessage("", calls.tool_calls, (thought(7),)),
        ToolResultMessage("n1", "read", BIG),
        UserMessage("(steering) look at the imports too"),
        AssistantMessage("", more.tool_calls, (thought(8),)),
        ToolResultMessage("n2", "read", BIG),  # not read by the model yet
    ]
    out, result = clear_context(history, keep_tool_results=0)
    assert not is_cleared(out[-1])  # unread
    assert is_cleared(out[-4])  # read, in the loop in progress: its text may go
    in_progress = [m for m in out[-5:] if isinstance(m, AssistantMessage)]
    assert [m.reasoning for m in in_progress] == [(thought(7),), (thought(8),)]
    settled = [m for m in out[:-6] if isinstance(m, AssistantMessage)]
    assert settled and all(m.reasoning == () for m in settled)
    assert result.cleared_reasoning == 6


def test_excluded_tools_short_results_and_sub_agent_answers() -> None:
    call = call_tool("SubAgent", {"task": "t", "role": "r"}, id="s1")
    history: list[Message] = [
        UserMessage("q"),
        AssistantMessage("", call_tool("read", {}, id="r1").tool_calls),
        ToolResultMessage("r1", "read", "short"),
        AssistantMessage("", call_tool("grep", {}, id="g1").tool_calls),
        ToolResultMessage("g1", "grep", BIG),
        AssistantMessage("", call.tool_calls),
        ToolResultMessage("s1", "SubAgent", BIG),
        AssistantMessage("done"),
    ]
    out, result = clear_context(history, keep_tool_results=0, exclude_tools={"grep"})
    assert out[2] == history[2] and out[4] == history[4]
    assert is_cleared(out[6]) and "ReadTranscript" in out[6].content
    assert result.cleared_results == 1


def test_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match="trigger"):
        ContextEdit(trigger=0)
    with pytest.raises(ConfigError, match="keep_tool_results"):
        ContextEdit(keep_tool_results=-1)


@tool()
def read(ctx: ToolContext, path: str) -> str:
    """Read a file."""
    return f"# {path}\n" + BIG


def reader(msgs: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
    if not tools:
        return "## Task\n- a summary"
    last = msgs[-1]
    if isinstance(last, UserMessage):
        return call_tool("read", {"path": f"f{len(msgs)}.py"})
    return "Reviewed."


async def _turns(keeper: AutoCompressor, turns: int, tmp_path: Path) -> tuple[Any, list[Any]]:
    model = ScriptedModel(responder=reader)
    events: list[Event] = []
    ctx = ToolContext("agent", tmp_path, tmp_path, events=events.append)
    messages: list[Message] = [SystemMessage("You review code.")]
    for i in range(turns):
        messages.append(UserMessage(f"turn {i}: read the next file"))
        cfg = RunConfig(model, messages, ToolRegistry([read]), ctx, context_keeper=keeper)
        messages = (await run(cfg)).messages
    return model, [e.data for e in events if e.kind == COMPRESSED]


async def test_clearing_spares_the_summary_call(tmp_path: Path) -> None:
    keeper = AutoCompressor(context_window=8_000, output_reserve=500)
    model, done = await _turns(keeper, 12, tmp_path)
    assert {d["reason"] for d in done} == {"context_edit"}
    assert all(d["after_tokens"] < d["before_tokens"] for d in done)
    assert all(c.tools for c in model.calls)  # no summary request was ever made
    assert max(estimate_tokens(c.messages) for c in model.calls) < 7_500
    without = AutoCompressor(context_window=8_000, output_reserve=500, edit=None)
    model, done = await _turns(without, 12, tmp_path)
    assert {d["reason"] for d in done} == {"threshold"}
    assert any(not c.tools for c in model.calls)  # summaries were written


@tool()
def dump(ctx: ToolContext, part: int) -> str:
    """Dump a part of the log."""
    return f"part {part}\n" + BIG


async def test_fable_edited_mid_tool_loop_is_never_refused(tmp_path: Path) -> None:
    steps: list[Any] = []
    for turn in range(3):
        steps += [call_tool("dump", {"part": turn * 10 + k}) for k in range(4)]
        steps.append(f"turn {turn} done")
    server = LoopbackAnthropicServer(ScriptedModel(steps)).start()
    model = AnthropicModel("claude-fable-5-2", base_url=server.base_url, max_retries=0)
    events: list[Event] = []
    ctx = ToolContext("agent", tmp_path, tmp_path, events=events.append)
    keeper = AutoCompressor(context_window=6_000, output_reserve=500, edit=ContextEdit(0.5, 1))
    messages: list[Message] = [SystemMessage("Read the log.")]
    try:
        for turn in range(3):
            messages.append(UserMessage(f"turn {turn}: dump four parts"))
            cfg = RunConfig(model, messages, ToolRegistry([dump]), ctx, context_keeper=keeper)
            messages = (await run(cfg)).messages
    finally:
        await model.aclose()
        server.close()
    assert server.rejected == []
    edits = [e.data for e in events if e.kind == COMPRESSED]
    assert edits and all(d["reason"] == "context_edit" for d in edits)
    assert sum(d["cleared_reasoning"] for d in edits) > 0
    assert not any(is_summary(m) for m in messages)
    assert any(is_cleared(m) for m in messages)


def test_config_toml_sets_or_turns_off_the_stage(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("context_edit_trigger = 0.5\ncontext_edit_keep = 1\n")
    s = Settings.load(home=tmp_path, workspace=tmp_path)
    assert configured_edit(s.context_edit_trigger, s.context_edit_keep) == ContextEdit(0.5, 1)
    assert configured_edit(0, 3) is None
    (tmp_path / "config.toml").write_text("context_edit_trigger = 1.5\n")
    with pytest.raises(ConfigError, match="context_edit_trigger"):
        Settings.load(home=tmp_path, workspace=tmp_path)


async def test_context_too_long_clears_every_read_result_before_any_summary(
    tmp_path: Path,
) -> None:
    model = ScriptedModel([ContextTooLongError("prompt is too long"), "fine"])
    events: list[Event] = []
    ctx = ToolContext("agent", tmp_path, tmp_path, events=events.append)
    messages = [*session(5), UserMessage("one more question")]
    keeper = AutoCompressor(context_window=100_000)  # its threshold never fires here
    out = await run(RunConfig(model, messages, ToolRegistry([read]), ctx, context_keeper=keeper))
    assert out.content == "fine"
    retried = model.calls[-1].messages
    assert [is_cleared(m) for m in retried if isinstance(m, ToolResultMessage)] == [True] * 5
    assert all(c.tools for c in model.calls)  # no summary request
    [edit] = [e.data for e in events if e.kind == COMPRESSED]
    assert edit["reason"] == "context_edit" and edit["hard"] is True


async def test_context_too_long_still_summarises_when_clearing_is_not_enough(
    tmp_path: Path,
) -> None:
    talk: list[Message] = []
    for i in range(8):
        talk += [UserMessage(f"q{i} " + "words " * 400), AssistantMessage(f"a{i} " + "more " * 400)]
    messages = [*session(3), *talk, UserMessage("one more question")]
    model = ScriptedModel([ContextTooLongError("prompt is too long"), "## Task\n- q", "fine"])
    events: list[Event] = []
    ctx = ToolContext("agent", tmp_path, tmp_path, events=events.append)
    keeper = AutoCompressor(context_window=100_000)
    out = await run(RunConfig(model, messages, ToolRegistry([read]), ctx, context_keeper=keeper))
    assert out.content == "fine"
    assert [c.tools == () for c in model.calls] == [False, True, False]  # a summary was asked
    assert [d["reason"] for d in (e.data for e in events if e.kind == COMPRESSED)] == [
        "context_edit",
        "context_too_long",
    ]
