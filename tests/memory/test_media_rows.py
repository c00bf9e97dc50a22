"""Images and PDFs in user messages and tool results survive the conversation stores of
both backends unchanged (base64 in the message rows), next to rows without any."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from retinue.memory import MemoryBackend
from retinue.messages import (
    AssistantMessage,
    DocumentPart,
    ImagePart,
    Message,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from retinue.store.conversations import ConversationStore

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
PDF = b"%PDF-1.7\n1 0 obj << /Type /Page >> endobj\n%%EOF\n"


@pytest.fixture
def conv_store(new_store: Callable[..., MemoryBackend]) -> ConversationStore:
    return new_store().conversations


async def test_media_parts_load_back_unchanged(conv_store: ConversationStore) -> None:
    history: list[Message] = [
        UserMessage("what is this?", (ImagePart("image/png", PNG, name="a.png"),)),
        AssistantMessage("", (ToolCall("c1", "Read", '{"file_path": "r.pdf"}'),)),
        ToolResultMessage("c1", "Read", "r.pdf", parts=(DocumentPart("application/pdf", PDF),)),
        AssistantMessage("a chart and a report"),
        UserMessage("and this?", (ImagePart("image/jpeg", url="https://example.com/x.jpg"),)),
        AssistantMessage("a cat"),
    ]
    await conv_store.save("t", "c", history)
    assert await conv_store.load("t", "c") == history
