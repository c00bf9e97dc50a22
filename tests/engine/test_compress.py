"""AutoCompressor through the run loop: trigger, forced compression, failures, sessions."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from retinue.engine import RunConfig, run
from retinue.engine.compress import SUMMARY_PREFIX, AutoCompressor, is_summary
from retinue.errors import ContextTooLongError, ModelError
from retinue.events import COMPRESSED, MODEL_CALLED, Event
from retinue.llm.base import Model, ModelResponse, ToolSpec
from retinue.llm.tokens import estimate_tokens
from retinue.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from retinue.testing import ScriptedModel, call_tool
from retinue.tools.base import ToolContext, ToolRegistry, tool

SUMMARY = "## Task\n- answer questions\n## Next step\n- keep going"


@tool()
def echo(ctx: ToolContext, text: str) -> str:
    """Echo the text back."""
    return text


def make_ctx(tmp_path: Path, events: list[Event]) -> ToolContext:
    return ToolContext(
        agent_id="agent", workspace=tmp_path, data_dir=tmp_path, events=events.append
    )


def history(turns: int, words: int = 40) -> list[Message]:
    """A system prompt and ``turns`` question/answer pairs of about ``words`` words each."""
    out: list[Message] = [SystemMessage("You are a careful assistant.")]
    for i in range(turns):
        out.append(UserMessage(f"question {i}: " + "lorem ipsum " * words))
        out.append(AssistantMessage(f"answer {i}: " + "dolor sit " * words))
    return out


def is_summary_request(messages: Sequence[Message]) -> bool:
    return bool(messages) and messages[0].content.startswith("You compress the earlier part")


def compressed_events(events: list[Event]) -> list[Event]:
    return [e for e in events if e.kind == COMPRESSED]


async def test_threshold_triggers_one_summary_call(tmp_path: Path) -> None:
    events: list[Event] = []
    messages = history(6)  # about 1,400 estimated tokens
    messages.append(UserMessage("and now?"))
    keeper = AutoCompressor(context_window=1_600, output_reserve=100)  # threshold: 1,200
    model = ScriptedModel([SUMMARY, "final answer"])
    cfg = RunConfig(model, messages, ToolRegistry(), make_ctx(tmp_path, events))
    cfg.context_keeper = keeper

    out = await run(cfg)

    assert out.content == "final answer"
    model.assert_done()
    assert is_summary_request(model.calls[0].messages)
    assert model.calls[0].tools == ()
    sent = model.calls[1].messages
    assert sent[0] == SystemMessage("You are a careful assistant.")
    assert is_summary(sent[1]) and SUMMARY in sent[1].content
    assert sent[-1] == UserMessage("and now?")
    assert estimate_tokens(sent) < 0.4 * 1_500
    # the stored history is the compressed one
    assert messages[: len(sent)] == list(sent)
    (event,) = compressed_events(events)
    assert event.data["ok"] is True and event.data["reason"] == "threshold"
    assert event.data["before_tokens"] > 1_200 > event.data["after_tokens"]
    assert event.data["removed_messages"] == 13 - (len(sent) - 2) >= 8
    # the summary call is traced like any model call
    calls = [e for e in events if e.kind == MODEL_CALLED]
    assert [e.data.get("purpose") for e in calls] == ["compress", None]


async def test_no_compression_below_threshold(tmp_path: Path) -> None:
    events: list[Event] = []
    messages = history(8, words=10)  # about 560 tokens, under 0.8 * 1,500
    messages.append(UserMessage("and now?"))
    before = list(messages)
    model = ScriptedModel(["final answer"])
    cfg = RunConfig(model, messages, ToolRegistry(), make_ctx(tmp_path, events))
    cfg.context_keeper = AutoCompressor(context_window=1_600, output_reserve=100)

    await run(cfg)

    assert model.call_count == 1
    assert list(model.calls[0].messages) == before
    assert compressed_events(events) == []


async def test_provider_prompt_figure_counts(tmp_path: Path) -> None:
    """The size is the provider's last prompt figure plus what was appended since."""
    events: list[Event] = []
    messages = history(4)
    messages.append(UserMessage("use the tool"))
    # the provider reports far more prompt tokens than the text suggests (big tool specs)
    first = ModelResponse(call_tool("echo", {"text": "hi"}), Usage(input_tokens=1_300))
    model = ScriptedModel([first, SUMMARY, "done"])
    cfg = RunConfig(model, messages, ToolRegistry([echo]), make_ctx(tmp_path, events))
    cfg.context_keeper = AutoCompressor(context_window=1_600, output_reserve=100)

    await run(cfg)

    model.assert_done()
    assert not is_summary_request(model.calls[0].messages)  # the estimate alone is small
    assert is_summary_request(model.calls[1].messages)
    (event,) = compressed_events(events)
    assert event.data["before_tokens"] > 1_300


async def test_request_size_tracks_appended_messages(tmp_path: Path) -> None:
    keeper = AutoCompressor(context_window=100_000)
    model = ScriptedModel()
    ctx = make_ctx(tmp_path, [])
    messages = history(2)
    await keeper.before_call(messages, model, ctx, 0)
    added: list[Message] = [AssistantMessage("x" * 400), UserMessage("y" * 400)]
    messages.extend(added)
    assert keeper.request_size(messages, 5_000) == 5_000 + estimate_tokens(added)
    # the provider's offset is learned and used when a new run has no figure yet
    await keeper.before_call(messages, model, ctx, 5_000)
    offset = 5_000 - estimate_tokens(messages[:-2])
    assert keeper.request_size(messages, 0) == estimate_tokens(messages) + offset
    # a list edited behind the compressor's back is estimated whole (plus the offset)
    messages[-1] = UserMessage("z" * 4_000)
    assert keeper.request_size(messages, 5_000) == estimate_tokens(messages) + offset
    # a list the compressor never saw is estimated whole
    assert keeper.request_size(list(messages), 0) == estimate_tokens(messages)


async def test_system_prompt_tail_and_tool_pairs_preserved(tmp_path: Path) -> None:
    messages: list[Message] = [SystemMessage("sys one"), SystemMessage("sys two")]
    messages += history(10)[1:]
    call = call_tool("echo", {"text": "z"}, id="c1")
    messages += [UserMessage("latest question"), call, ToolResultMessage("c1", "echo", "z")]
    tail = messages[-3:]
    keeper = AutoCompressor(
        context_window=1_000, output_reserve=100, keep_ratio=0.05, hard_keep_ratio=0.05
    )
    model = ScriptedModel([SUMMARY])

    result = await keeper.compress_now(messages, model, make_ctx(tmp_path, []))

    assert result is not None
    assert messages[:2] == [SystemMessage("sys one"), SystemMessage("sys two")]
    assert is_summary(messages[2]) and messages[2].content.startswith(SUMMARY_PREFIX)
    assert messages[-3:] == tail
    assert result.removed_messages == 20
    assert len(messages) == 2 + 1 + 3


async def test_old_bulky_tool_results_in_tail_are_trimmed(tmp_path: Path) -> None:
    bulky = "data " * 1_000  # about 1,250 tokens
    messages = history(20)  # about 4,700 tokens, so the kept half holds both results
    messages += [
        UserMessage("read it"),
        call_tool("echo", {"text": "a"}, id="c1"),
        ToolResultMessage("c1", "echo", bulky),
        AssistantMessage("read it"),
        UserMessage("again"),
        call_tool("echo", {"text": "b"}, id="c2"),
        ToolResultMessage("c2", "echo", bulky),
    ]
    keeper = AutoCompressor(context_window=100_000, trim_over_tokens=500)
    result = await keeper.compress_now(messages, ScriptedModel([SUMMARY]), make_ctx(tmp_path, []))

    assert result is not None and result.trimmed_results == 1
    old, newest = messages[-5], messages[-1]
    assert isinstance(old, ToolResultMessage) and "trimmed by context compression" in old.content
    assert len(old.content) < 1_200
    assert newest == ToolResultMessage("c2", "echo", bulky)  # not read by the model yet


async def test_context_too_long_forces_one_compression_and_retry(tmp_path: Path) -> None:
    events: list[Event] = []
    messages = history(6)
    messages.append(UserMessage("and now?"))
    model = ScriptedModel([ContextTooLongError("prompt is too long"), SUMMARY, "answer"])
    cfg = RunConfig(model, messages, ToolRegistry(), make_ctx(tmp_path, events))
    cfg.context_keeper = AutoCompressor(context_window=100_000)  # the threshold never fires

    out = await run(cfg)

    assert out.content == "answer"
    model.assert_done()
    assert model.call_count == 3
    assert is_summary_request(model.calls[1].messages)
    retried = model.calls[2].messages
    assert is_summary(retried[1]) and retried[-1] == UserMessage("and now?")
    assert len(retried) < len(model.calls[0].messages)
    (event,) = compressed_events(events)
    assert event.data["reason"] == "context_too_long" and event.data["ok"] is True


async def test_context_too_long_with_nothing_to_shrink_raises(tmp_path: Path) -> None:
    messages: list[Message] = [SystemMessage("sys"), UserMessage("hello")]
    model = ScriptedModel([ContextTooLongError("prompt is too long")])
    cfg = RunConfig(model, messages, ToolRegistry(), make_ctx(tmp_path, []))
    cfg.context_keeper = AutoCompressor(context_window=100_000)

    with pytest.raises(ContextTooLongError):
        await run(cfg)
    assert model.call_count == 1
    assert messages == [SystemMessage("sys"), UserMessage("hello")]


async def test_failed_summary_keeps_conversation_and_run_goes_on(tmp_path: Path) -> None:
    events: list[Event] = []
    messages = history(12)
    messages.append(UserMessage("and now?"))
    before = list(messages)
    model = ScriptedModel([ModelError("503 from provider"), "still answering"])
    cfg = RunConfig(model, messages, ToolRegistry(), make_ctx(tmp_path, events))
    cfg.context_keeper = AutoCompressor(context_window=1_600, output_reserve=100)

    out = await run(cfg)

    assert out.content == "still answering"
    assert list(model.calls[1].messages) == before
    assert messages[:-1] == before
    (event,) = compressed_events(events)
    assert event.data["ok"] is False and "503" in event.data["error"]


async def test_failed_forced_summary_lets_the_error_through(tmp_path: Path) -> None:
    messages = history(6)
    before = list(messages)
    model = ScriptedModel([ContextTooLongError("too long"), ModelError("down")])
    cfg = RunConfig(model, messages, ToolRegistry(), make_ctx(tmp_path, []))
    cfg.context_keeper = AutoCompressor(context_window=100_000)

    with pytest.raises(ContextTooLongError):
        await run(cfg)
    assert messages == before


async def test_compress_now_reports_failure_and_nothing_to_do(tmp_path: Path) -> None:
    keeper = AutoCompressor()
    ctx = make_ctx(tmp_path, [])
    messages = history(5)
    before = list(messages)
    with pytest.raises(ModelError, match="down"):
        await keeper.compress_now(messages, ScriptedModel([ModelError("down")]), ctx)
    assert messages == before
    short: list[Message] = [SystemMessage("sys"), UserMessage("hi")]
    assert await keeper.compress_now(short, ScriptedModel(), ctx) is None
    # a manual compression of a short conversation still halves it
    result = await keeper.compress_now(messages, ScriptedModel([SUMMARY]), ctx)
    assert result is not None and result.after_tokens < 0.6 * result.before_tokens
    # a second one folds the first summary in, but never summarises the summary alone
    model = ScriptedModel([SUMMARY])
    assert await keeper.compress_now(messages, model, ctx) is not None
    assert "[user] [Summary of earlier conversation]" in model.calls[0].messages[1].content
    alone: list[Message] = [SystemMessage("sys"), messages[1], UserMessage("hi")]
    assert is_summary(alone[1])
    assert await keeper.compress_now(alone, ScriptedModel(), ctx) is None


class RecordingMemory:
    """A memory that records what it is asked to consolidate."""

    def __init__(self) -> None:
        self.consolidated: list[tuple[str, list[Message]]] = []

    async def render(self, tenant: str, role: str) -> str:
        return ""

    async def consolidate(
        self,
        *,
        tenant: str,
        role: str,
        session_id: str,
        messages: Sequence[Message],
        model: Model,
    ) -> bool:
        self.consolidated.append((session_id, list(messages)))
        return True


async def test_memorize_hands_compressed_away_messages_to_memory(tmp_path: Path) -> None:
    memory = RecordingMemory()
    ctx = ToolContext(agent_id="a1", workspace=tmp_path, data_dir=tmp_path, memory=memory)
    messages = history(5)
    original = list(messages)
    keeper = AutoCompressor(memorize=True, keep_ratio=0.01, hard_keep_ratio=0.01)

    result = await keeper.compress_now(messages, ScriptedModel([SUMMARY]), ctx)

    assert result is not None
    ((session_id, given),) = memory.consolidated
    assert session_id == "a1#compress"
    assert given == original[1 : 1 + result.removed_messages]


async def test_interactive_session_stays_under_budget_for_50_turns(tmp_path: Path) -> None:
    """One stored history, 50 interactive turns with tool use, a 2,000-token window."""
    window, reserve = 2_000, 200
    budget = window - reserve
    summaries = 0

    def responder(msgs: Sequence[Message], tools: Sequence[ToolSpec]) -> AssistantMessage | str:
        nonlocal summaries
        if is_summary_request(msgs):
            summaries += 1
            return SUMMARY + f" (summary {summaries})"
        last = msgs[-1]
        if isinstance(last, UserMessage) and "tool" in last.content:
            return call_tool("echo", {"text": "result " * 60})
        return "reply " * 50

    model = ScriptedModel(responder=responder)
    events: list[Event] = []
    keeper = AutoCompressor(context_window=window, output_reserve=reserve)
    stored: list[Message] = [SystemMessage("You are a sub-agent.")]
    for turn in range(50):
        stored.append(UserMessage(f"turn {turn}: " + ("use the tool " if turn % 3 else "") * 20))
        cfg = RunConfig(
            model,
            stored,
            ToolRegistry([echo]),
            make_ctx(tmp_path, events),
            interactive=True,
            context_keeper=keeper,
        )
        out = await run(cfg)
        assert out.waiting_for_input
        assert out.messages is stored
        assert estimate_tokens(stored) <= budget, f"turn {turn}"
        for call in model.calls:
            assert estimate_tokens(call.messages) <= budget
        model.calls.clear()
        assert stored[0] == SystemMessage("You are a sub-agent.")
    assert summaries >= 5
    assert len(compressed_events(events)) == summaries
