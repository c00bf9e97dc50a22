"""A long session on an emulated Claude Fable 5.2 (thinking always on, signed blocks required
back with their tool calls): it is compressed several times mid-conversation and no request is
ever refused by the emulated rules (``retinue.llm.loopback_anthropic``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from retinue.engine import RunConfig, run
from retinue.engine.compress import SUMMARY_PREFIX, AutoCompressor, is_summary
from retinue.llm.anthropic import AnthropicModel
from retinue.llm.base import ToolSpec
from retinue.llm.loopback_anthropic import LoopbackAnthropicServer
from retinue.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolResultMessage,
    UserMessage,
)
from retinue.testing import ScriptedModel, call_tool
from retinue.tools.base import ToolContext, ToolRegistry, tool

FABLE = "claude-fable-5-2"
SUMMARY = "The user asked for long echoes; each was answered."


@tool()
def echo(ctx: ToolContext, text: str) -> str:
    """Echo the text back."""
    return text


def respond(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> AssistantMessage | str:
    """A summary when asked for one, else a long tool call, then an answer to its result."""
    if isinstance(messages[0], SystemMessage) and "summar" in messages[0].content.lower():
        return SUMMARY
    if isinstance(messages[-1], ToolResultMessage):
        return "answer: " + "word " * 150
    return call_tool("echo", {"text": "x" * 800})


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if isinstance(b, dict))


def _summarised_with_thinking(body: dict[str, Any]) -> bool:
    """A request after a compression whose turn in progress sends its thinking back."""
    messages = body["messages"]
    summarised = any(
        m["role"] == "user" and SUMMARY_PREFIX in _text(m["content"]) for m in messages
    )
    kinds = [
        [b["type"] for b in m["content"]]
        for m in messages
        if m["role"] == "assistant" and isinstance(m["content"], list)
    ]
    return summarised and any(k[:1] == ["thinking"] and "tool_use" in k for k in kinds)


async def test_a_long_fable_session_compresses_and_is_never_refused(tmp_path: Path) -> None:
    with LoopbackAnthropicServer(ScriptedModel([respond] * 40), redact=True) as server:
        model = AnthropicModel(FABLE, base_url=server.base_url, max_retries=0)
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
    assert server.rejected == []
    assert any(is_summary(m) for m in messages)
    assert any(_summarised_with_thinking(b) for b in server.requests)
    # a summary never carries a signed block: only the turns kept whole keep theirs
    summaries = [m for m in messages if is_summary(m)]
    assert all(not getattr(m, "reasoning", ()) for m in summaries)
