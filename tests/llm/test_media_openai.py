"""Images and PDFs over Chat Completions, through the official SDK to the loopback server."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from retinue.llm.base import ModelResponse
from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.llm.openai import OpenAIModel
from retinue.messages import (
    AssistantMessage,
    DocumentPart,
    ImagePart,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from retinue.testing import ScriptedModel

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))
PDF = b"%PDF-1.7\n1 0 obj << /Type /Page >> endobj\n%%EOF\n"
IMAGE = ImagePart("image/png", PNG, name="chart.png")
DOC = DocumentPart("application/pdf", PDF, name="report.pdf")

_open: list[OpenAIModel] = []


def bytes_of(parts: tuple[ImagePart | DocumentPart, ...]) -> list[bytes]:
    """What reached the model (a name does not travel in the wire form)."""
    return [p.data for p in parts]


@pytest.fixture(autouse=True)
async def _close_models() -> AsyncIterator[None]:
    yield
    while _open:
        await _open.pop().aclose()


def make(server: LoopbackOpenAIServer, name: str = "gpt-4o") -> OpenAIModel:
    model = OpenAIModel(name, base_url=server.base_url, max_retries=0)
    _open.append(model)
    return model


async def test_user_image_and_pdf_are_image_url_and_file_parts() -> None:
    scripted = ScriptedModel([ModelResponse(AssistantMessage("a chart"))])
    with LoopbackOpenAIServer(scripted) as server:
        await make(server).complete([UserMessage("what is this?", (IMAGE, DOC))])
    content = server.requests[0]["messages"][0]["content"]
    assert content[0] == {"type": "text", "text": "what is this?"}
    assert content[1]["type"] == "image_url"
    assert content[1]["image_url"]["url"].startswith("data:image/png;base64,iVBORw0KGgo")
    assert content[2]["type"] == "file" and content[2]["file"]["filename"] == "report.pdf"
    received = scripted.calls[0].messages[0]
    assert isinstance(received, UserMessage) and bytes_of(received.parts) == bytes_of((IMAGE, DOC))


async def test_a_tool_results_image_follows_the_steps_results_as_a_user_message() -> None:
    history = [
        UserMessage("screenshot both"),
        AssistantMessage("", (ToolCall("c1", "shot"), ToolCall("c2", "shot"))),
        ToolResultMessage("c1", "shot", "one", parts=(IMAGE,)),
        ToolResultMessage("c2", "shot", "two"),
    ]
    scripted = ScriptedModel([ModelResponse(AssistantMessage("seen"))])
    with LoopbackOpenAIServer(scripted) as server:
        answer = await make(server).complete(history)
    assert answer.message.content == "seen"
    roles = [m["role"] for m in server.requests[0]["messages"]]
    assert roles == ["user", "assistant", "tool", "tool", "user"]
    last = scripted.calls[0].messages[-1]
    assert isinstance(last, UserMessage) and bytes_of(last.parts) == [PNG]


async def test_a_model_without_vision_gets_a_line_naming_the_part() -> None:
    scripted = ScriptedModel([ModelResponse(AssistantMessage("ok"))])
    with LoopbackOpenAIServer(scripted) as server:
        await make(server, "deepseek-chat").complete([UserMessage("look", (IMAGE,))])
    sent = server.requests[0]["messages"][0]["content"]
    assert isinstance(sent, str)
    assert sent.startswith("look\n[image chart.png (image/png, 72 bytes) not sent: deepseek-chat")


async def test_the_fast_path_and_the_sdk_path_send_the_same_media() -> None:
    scripted = ScriptedModel(
        [ModelResponse(AssistantMessage("a")), ModelResponse(AssistantMessage("b"))]
    )
    with LoopbackOpenAIServer(scripted) as server:
        model = make(server)
        await model.complete([UserMessage("x", (IMAGE,))])
        await model.complete([UserMessage("x", (IMAGE,))], on_text=lambda _t: None)
    first, second = (r["messages"] for r in server.requests)
    assert first == second
