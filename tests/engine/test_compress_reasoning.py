"""Compression and reasoning parts: a summary never reads nor edits a signed block; the
summarised turns take theirs along, finished kept turns drop theirs, the turn in progress
keeps its own; a long session on an emulated Claude Fable 5.2 is never refused."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from retinue.engine import RunConfig, run
from retinue.engine.compress import SUMMARY_PREFIX, AutoCompressor, is_summary
from retinue.llm.anthropic import AnthropicModel
from retinue.llm.base import ToolSpec
from retinue.llm.loopback_anthropic import LoopbackAnthropicServer
from retinue.messages import (
    AssistantMessage,
    Message,
    ReasoningPart,
    SystemMessage,
    ToolResultMessage,
    UserMessage,
    message_text_size,
)
from retinue.testing import ScriptedModel, call_tool
from retinue.tools.base import ToolContext, ToolRegistry, tool

SUMMARY = "## Task\n- answer questions"


def thought(n: int) -> ReasoningPart:
    return ReasoningPart(
        "anthropic", "claude-fable-5-2", "thinking", {"signature": f"SIG-{n}"}, f"THOUGHT-{n}"
    )


def conversation() -> list[Message]:
    out: list[Message] = [SystemMessage("You are careful.")]
    for i in range(12):
        out.append(UserMessage(f"question {i}: " + "lorem ipsum " * 40))
        out.append(AssistantMessage(f"answer {i}: " + "dolor sit " * 40, (), (thought(i),)))
    call = call_tool("echo", {"text": "z"}, id="c1")
    out += [
        UserMessage("latest question"),
        AssistantMessage("", call.tool_calls, (thought(99),)),
        ToolResultMessage("c1", "echo", "z"),
    ]
    return out


async def test_summary_reads_no_block_and_kept_blocks_are_settled(tmp_path: Path) -> None:
    messages = conversation()
    in_progress = messages[-2]
    summariser = ScriptedModel([SUMMARY])
    keeper = AutoCompressor(context_window=100_000, keep_ratio=0.02, hard_keep_ratio=0.02)
    ctx = ToolContext("agent", tmp_path, tmp_path)
    result = await keeper.compress_now(messages, summariser, ctx)

    assert result is not None and result.removed_messages > 0
    transcript = "".join(m.content for m in summariser.calls[0].messages)
    assert "THOUGHT" not in transcript and "SIG-" not in transcript
    assert is_summary(messages[1]) and "THOUGHT" not in messages[1].content
    # the turn in progress keeps its signed block, unchanged; finished turns keep none
    assert messages[-2] is in_progress
    kept = [m for m in messages[:-2] if isinstance(m, AssistantMessage)]
    assert kept and all(m.reasoning == () for m in kept)


def test_reasoning_counts_in_the_size_estimate() -> None:
    plain = AssistantMessage("hi")
    with_part = AssistantMessage("hi", (), (thought(1),))
    assert message_text_size([with_part]) > message_text_size([plain])


@tool()
def echo(ctx: ToolContext, text: str) -> str:
    """Echo the text back."""
    return text


def respond(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> AssistantMessage | str:
    """The emulated model: a summary when asked for one, else a long tool call, then an
    answer once the result is in."""
    if isinstance(messages[0], SystemMessage) and "summar" in messages[0].content.lower():
        return SUMMARY
    if isinstance(messages[-1], ToolResultMessage):
        return "answer: " + "word " * 150
    return call_tool("echo", {"text": "x" * 800})


@pytest.fixture
def fable_server() -> Iterator[LoopbackAnthropicServer]:
    with LoopbackAnthropicServer(ScriptedModel([respond] * 40), redact=True) as server:
        yield server


def _after_summary_with_blocks(body: dict[str, Any]) -> bool:
    wire = body["messages"]
    summarised = any(
        b.get("type") == "text" and b["text"].startswith(SUMMARY_PREFIX)
        for m in wire
        if m["role"] == "user"
        for b in m["content"]
    )
    last = [m for m in wire if m["role"] == "assistant"][-1:]
    return summarised and bool(last) and last[0]["content"][0]["type"] == "thinking"


async def test_a_long_fable_session_compresses_and_is_never_refused(
    fable_server: LoopbackAnthropicServer, tmp_path: Path
) -> None:
    model = AnthropicModel("claude-fable-5-2", base_url=fable_server.base_url, max_retries=0)
    keeper = AutoCompressor(context_window=4_000, output_reserve=500)
    messages: list[Message] = [SystemMessage("Be brief.")]
    try:
        for i in range(6):
            messages.append(UserMessage(f"turn {i}: echo something long, then answer"))
            out = await run(
                RunConfig(
                    model,
                    messages,
                    ToolRegistry([echo]),
                    ToolContext("agent", tmp_path, tmp_path),
                    context_keeper=keeper,
                )
            )
            messages = out.messages
    finally:
        await model.aclose()
    assert fable_server.rejected == []
    assert any(is_summary(m) for m in messages)
    # after a compression, the turn in progress still sent its signed blocks back
    assert any(_after_summary_with_blocks(b) for b in fable_server.requests)
    # a summary never carries a signed block: only the turns kept whole keep theirs
    assert all(not getattr(m, "reasoning", ()) for m in messages if is_summary(m))
