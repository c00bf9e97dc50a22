"""A long session on an emulated gpt-5.6-terra over the Responses API: it is compressed several
times, and no request is ever refused by the emulated rules."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from retinue.engine import RunConfig, run
from retinue.engine.compress import SUMMARY_PREFIX, AutoCompressor, is_summary
from retinue.llm.base import ToolSpec
from retinue.llm.loopback_responses import LoopbackResponsesServer
from retinue.llm.openai_responses import OpenAIResponsesModel
from retinue.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolResultMessage,
    UserMessage,
)
from retinue.testing import ScriptedModel, call_tool
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


def _summarised_with_reasoning(body: dict[str, Any]) -> bool:
    """A request after a compression whose turn in progress replays its reasoning item."""
    items = body["input"]
    summarised = any(
        i.get("role") == "user" and str(i.get("content", "")).startswith(SUMMARY_PREFIX)
        for i in items
    )
    return summarised and any(i.get("type") == "reasoning" for i in items)


async def test_a_long_session_compresses_and_is_never_refused(tmp_path: Path) -> None:
    with LoopbackResponsesServer(ScriptedModel([respond] * 40)) as server:
        model = OpenAIResponsesModel("gpt-5.6-terra", base_url=server.base_url, max_retries=0)
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
    assert any(_summarised_with_reasoning(b) for b in server.requests)
