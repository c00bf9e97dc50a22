"""The long session the provider suites share: six turns, each a long tool result and a long
answer, on a small context window, so the history is compressed several times."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from retinue.engine import RunConfig, run
from retinue.engine.compress import AutoCompressor
from retinue.llm.base import ToolSpec
from retinue.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolResultMessage,
    UserMessage,
)
from retinue.testing import call_tool
from retinue.tools.base import ToolContext, ToolRegistry, tool

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


async def long_session(model: Any, workspace: Path, turns: int = 6) -> list[Message]:
    """The history after ``turns`` turns on ``model`` (closed at the end)."""
    keeper = AutoCompressor(context_window=4_000, output_reserve=500)
    messages: list[Message] = [SystemMessage("Be brief.")]
    try:
        for i in range(turns):
            messages.append(UserMessage(f"turn {i}: echo something long, then answer"))
            config = RunConfig(
                model,
                messages,
                ToolRegistry([echo]),
                ToolContext("agent", workspace, workspace),
                context_keeper=keeper,
            )
            messages = (await run(config)).messages
    finally:
        await model.aclose()
    return messages
