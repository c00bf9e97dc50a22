"""Images and PDFs over the OpenAI Responses API, through the official SDK to the emulator."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from retinue.llm.base import ModelResponse
from retinue.llm.loopback_responses import LoopbackResponsesServer
from retinue.llm.openai_responses import OpenAIResponsesModel
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

_open: list[OpenAIResponsesModel] = []


@pytest.fixture(autouse=True)
async def _close_models() -> AsyncIterator[None]:
    yield
    while _open:
        await _open.pop().aclose()


def make(server: LoopbackResponsesServer, name: str = "gpt-5.6-terra") -> OpenAIResponsesModel:
    model = OpenAIResponsesModel(name, base_url=server.base_url, max_retries=0)
    _open.append(model)
    return model


async def test_user_media_are_input_image_and_input_file() -> None:
    scripted = ScriptedModel([ModelResponse(AssistantMessage("a chart"))])
    with LoopbackResponsesServer(scripted) as server:
        await make(server).complete([UserMessage("what is this?", (IMAGE, DOC))])
    content = server.requests[0]["input"][0]["content"]
    assert [p["type"] for p in content] == ["input_text", "input_image", "input_file"]
    assert content[1]["image_url"].startswith("data:image/png;base64,iVBORw0KGgo")
    assert content[2]["filename"] == "report.pdf"
    received = scripted.calls[0].messages[-1]
    assert isinstance(received, UserMessage)
    assert [p.data for p in received.parts] == [PNG, PDF]


async def test_a_tool_results_image_is_in_its_function_call_output() -> None:
    history = [
        UserMessage("screenshot"),
        AssistantMessage("", (ToolCall("c1", "shot"),)),
        ToolResultMessage("c1", "shot", "the screen", parts=(IMAGE,)),
    ]
    scripted = ScriptedModel([ModelResponse(AssistantMessage("seen"))])
    with LoopbackResponsesServer(scripted) as server:
        answer = await make(server).complete(history)
    assert answer.message.content == "seen"
    output = server.requests[0]["input"][-1]["output"]
    assert [p["type"] for p in output] == ["input_text", "input_image"]
    result = scripted.calls[0].messages[-1]
    assert isinstance(result, ToolResultMessage) and result.content == "the screen"
    assert [p.data for p in result.parts] == [PNG]


async def test_a_text_only_model_reads_a_note_instead() -> None:
    scripted = ScriptedModel([ModelResponse(AssistantMessage("ok"))])
    with LoopbackResponsesServer(scripted) as server:
        await make(server, "o3-mini").complete([UserMessage("look", (IMAGE,))])
    sent = server.requests[0]["input"][0]["content"]
    assert sent == (
        "look\n[image chart.png (image/png, 72 bytes) not sent: o3-mini does not accept "
        "images or files]"
    )
