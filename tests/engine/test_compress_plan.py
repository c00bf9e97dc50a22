"""The pure parts of AutoCompress: where to cut, trimming, transcripts (property-tested)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from retinue.engine.compress import (
    AutoCompressor,
    choose_cut,
    is_summary,
    render_transcript,
    trim_tool_results,
)
from retinue.llm.tokens import estimate_text_tokens
from retinue.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from retinue.testing import ScriptedModel
from retinue.tools.base import ToolContext

text = st.integers(min_value=0, max_value=600).map(lambda n: "w" * n)


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    """System prompt(s), then turns: a user message, tool rounds, usually a final reply."""
    out: list[Message] = [SystemMessage("sys")] * draw(st.integers(1, 2))
    next_id = 0
    for _ in range(draw(st.integers(0, 8))):
        out.append(UserMessage(draw(text)))
        for _ in range(draw(st.integers(0, 3))):
            calls = []
            for _ in range(draw(st.integers(1, 3))):
                next_id += 1
                calls.append(ToolCall(f"c{next_id}", "t", "{}"))
            out.append(AssistantMessage(draw(text), tuple(calls)))
            results = [ToolResultMessage(c.id, "t", draw(text)) for c in calls]
            out.extend(draw(st.permutations(results)))
        if draw(st.booleans()):
            out.append(AssistantMessage(draw(text)))
    return out


def assert_pairs_whole(messages: Sequence[Message]) -> None:
    """Every result follows its call, and every call is followed by all its results."""
    issued: dict[str, int] = {}
    for i, m in enumerate(messages):
        if isinstance(m, AssistantMessage):
            issued.update((c.id, i) for c in m.tool_calls)
        elif isinstance(m, ToolResultMessage):
            assert m.tool_call_id in issued, f"result {m.tool_call_id} without its call"
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolResultMessage)}
    assert answered == set(issued), "a call lost its result"


@settings(max_examples=150, deadline=None)
@given(conversations(), st.integers(0, 3_000))
def test_choose_cut_never_splits_a_tool_pair(convo: list[Message], keep: int) -> None:
    body = [m for m in convo if not isinstance(m, SystemMessage)]
    cut = choose_cut(body, keep)
    if cut is None:
        return
    assert 1 <= cut < len(body)
    assert not isinstance(body[cut], ToolResultMessage)
    assert_pairs_whole(body[cut:])
    assert_pairs_whole(body[:cut])


@settings(max_examples=60, deadline=None)
@given(conversations(), st.booleans())
def test_compression_keeps_system_prompt_tail_and_pairs(convo: list[Message], hard: bool) -> None:
    messages = list(convo)
    keeper = AutoCompressor(context_window=4_000, output_reserve=500, trim_over_tokens=10**6)
    model = ScriptedModel(responder=lambda msgs, tools: "## Task\n- x")
    ctx = ToolContext(agent_id="a", workspace=Path("."), data_dir=Path("."))

    result = asyncio.run(keeper.compress_now(messages, model, ctx, hard=hard))

    head = [m for m in convo if isinstance(m, SystemMessage)]
    assert messages[: len(head)] == head
    if result is None:
        assert messages == convo
        return
    assert is_summary(messages[len(head)])
    tail = messages[len(head) + 1 :]
    assert tail == convo[len(convo) - len(tail) :]
    assert len(tail) >= 1
    assert result.removed_messages == len(convo) - len(head) - len(tail)
    assert_pairs_whole(messages)


def test_trim_leaves_unread_results_and_small_ones() -> None:
    big = "x" * 8_000
    tail: list[Message] = [
        AssistantMessage("", (ToolCall("a", "t"), ToolCall("b", "t"))),
        ToolResultMessage("a", "t", big),
        ToolResultMessage("b", "t", "small"),
        AssistantMessage("", (ToolCall("c", "t"),)),
        ToolResultMessage("c", "t", big),
    ]
    out, n = trim_tool_results(tail, 500)
    assert n == 1
    first = out[1]
    assert isinstance(first, ToolResultMessage) and first.tool_call_id == "a"
    assert first.content.startswith("x" * 1_000) and "7000 characters trimmed" in first.content
    assert out[2] == tail[2] and out[4] == tail[4]
    _, forced = trim_tool_results(tail, 500, newest_too=True)
    assert forced == 2


def test_transcript_fits_and_keeps_first_and_newest() -> None:
    messages: list[Message] = [UserMessage("[Summary of earlier conversation]\nold state")]
    messages += [UserMessage(f"message {i} " + "y" * 400) for i in range(50)]
    out = render_transcript(messages, 1_000)
    assert estimate_text_tokens(out) <= 1_000
    assert out.startswith("[user] [Summary of earlier conversation]")
    assert "message 49" in out and "message 0 " not in out
    assert "messages omitted" in out
    call = AssistantMessage("thinking", (ToolCall("c9", "read", '{"path": "a.py"}'),))
    result = ToolResultMessage("c9", "read", "boom", is_error=True)
    small = render_transcript([call, result], 1_000)
    assert '[assistant calls read (c9)] {"path": "a.py"}' in small
    assert "[result of read (c9), error] boom" in small
