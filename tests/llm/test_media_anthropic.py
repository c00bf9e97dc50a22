"""Images and PDFs over the Anthropic Messages API, through the official SDK to the emulator."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from retinue.llm._anthropic_wire import CACHE, messages_to_anthropic
from retinue.llm.anthropic import AnthropicModel
from retinue.llm.base import ModelResponse
from retinue.llm.loopback import LoopbackServer
from retinue.messages import (
    AssistantMessage,
    DocumentPart,
    ImagePart,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from retinue.testing import ScriptedModel

Factory = Callable[..., LoopbackServer]
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))
PDF = b"%PDF-1.7\n1 0 obj << /Type /Page >> endobj\n%%EOF\n"
IMAGE = ImagePart("image/png", PNG, name="chart.png")
DOC = DocumentPart("application/pdf", PDF, name="report.pdf")

_open: list[AnthropicModel] = []


@pytest.fixture(autouse=True)
async def _close_models() -> AsyncIterator[None]:
    yield
    while _open:
        await _open.pop().aclose()


def make(server: LoopbackServer) -> AnthropicModel:
    model = AnthropicModel("claude-test", base_url=server.base_url, max_retries=0)
    _open.append(model)
    return model


async def test_user_media_are_image_and_document_blocks(anthropic_server: Factory) -> None:
    scripted = ScriptedModel([ModelResponse(AssistantMessage("a chart"))])
    server = anthropic_server(scripted)
    await make(server).complete([UserMessage("what is this?", (IMAGE, DOC))])
    blocks = server.requests[0]["messages"][0]["content"]
    assert [b["type"] for b in blocks] == ["text", "image", "document"]
    assert blocks[1]["source"]["type"] == "base64"
    assert blocks[1]["source"]["media_type"] == "image/png"
    assert blocks[2]["source"]["media_type"] == "application/pdf"
    received = scripted.calls[0].messages[-1]
    assert isinstance(received, UserMessage) and received.content == "what is this?"
    assert [p.data for p in received.parts] == [PNG, PDF]


async def test_a_tool_results_image_is_inside_its_tool_result(anthropic_server: Factory) -> None:
    history = [
        UserMessage("screenshot"),
        AssistantMessage("", (ToolCall("c1", "shot"),)),
        ToolResultMessage("c1", "shot", "the screen", parts=(IMAGE,)),
    ]
    scripted = ScriptedModel([ModelResponse(AssistantMessage("seen"))])
    server = anthropic_server(scripted)
    answer = await make(server).complete(history)
    assert answer.message.content == "seen"
    result_block = server.requests[0]["messages"][-1]["content"][0]
    assert result_block["type"] == "tool_result"
    assert [b["type"] for b in result_block["content"]] == ["text", "image"]
    result = scripted.calls[0].messages[-1]
    assert isinstance(result, ToolResultMessage) and result.content == "the screen"
    assert [p.data for p in result.parts] == [PNG]


def test_a_url_image_is_a_url_source() -> None:
    url = ImagePart("image/jpeg", url="https://example.com/cat.jpg")
    _, wire = messages_to_anthropic([UserMessage("see", (url,))], "claude-test")
    assert wire[0]["content"][1] == {
        "type": "image",
        "source": {"type": "url", "url": "https://example.com/cat.jpg"},
        "cache_control": CACHE,
    }
