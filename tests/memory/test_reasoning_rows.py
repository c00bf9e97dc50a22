"""Reasoning parts (signed thinking blocks, encrypted reasoning) survive the conversation
stores of both backends unchanged, in order, with the text and calls they came with."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from retinue.memory import MemoryBackend
from retinue.messages import (
    AssistantMessage,
    Message,
    ReasoningPart,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from retinue.store.conversations import ConversationStore


@pytest.fixture
def conv_store(new_store: Callable[..., MemoryBackend]) -> ConversationStore:
    return new_store().conversations


async def test_reasoning_parts_load_back_unchanged(conv_store: ConversationStore) -> None:
    thinking = ReasoningPart(
        "anthropic", "claude-fable-5-2", "thinking", {"signature": "EqQBCkgIARAB+/="}, "Hmm ✓"
    )
    redacted = ReasoningPart("anthropic", "claude-fable-5-2", "redacted_thinking", {"data": "x"})
    item = ReasoningPart(
        "openai", "gpt-5.4", "reasoning", {"id": "rs_1", "encrypted_content": "gAAA", "summary": []}
    )
    history: list[Message] = [
        UserMessage("read a.txt"),
        AssistantMessage("", (ToolCall("c1", "Read", "{}"),), (thinking, redacted)),
        ToolResultMessage("c1", "Read", "ok"),
        AssistantMessage("done", (), (item,)),
    ]
    await conv_store.save("t", "c", history)
    assert await conv_store.load("t", "c") == history
