"""Images and PDFs over the Gemini API, through the official SDK to the loopback emulator."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from retinue.llm.base import ToolSpec
from retinue.llm.gemini import GeminiModel
from retinue.llm.loopback_gemini import LoopbackGeminiServer
from retinue.messages import (
    DocumentPart,
    ImagePart,
    Message,
    ToolResultMessage,
    UserMessage,
)
from retinue.testing import ScriptedModel, call_tool

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))
PDF = b"%PDF-1.7\n1 0 obj << /Type /Page >> endobj\n%%EOF\n"
IMAGE = ImagePart("image/png", PNG, name="chart.png")
DOC = DocumentPart("application/pdf", PDF, name="report.pdf")
SHOT = ToolSpec("shot", "Take a screenshot", {"type": "object", "properties": {}})


@pytest.fixture
def gemini() -> Iterator[Any]:
    started: list[LoopbackGeminiServer] = []

    def start(script: ScriptedModel) -> LoopbackGeminiServer:
        server = LoopbackGeminiServer(script).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


def _mime(part: dict[str, Any]) -> str:
    """An inline part's media type (protobuf JSON takes either spelling, and the SDK writes
    both: ``inlineData`` with ``mime_type``, ``inline_data`` in a function response)."""
    blob = part.get("inlineData") or part["inline_data"]
    return blob.get("mimeType", blob.get("mime_type"))


def _model(server: LoopbackGeminiServer, name: str) -> GeminiModel:
    return GeminiModel(name, base_url=server.base_url, max_retries=0)


async def test_user_media_are_inline_data_parts(gemini: Any) -> None:
    scripted = ScriptedModel(["a chart"])
    server = gemini(scripted)
    await _model(server, "gemini-3-pro").complete([UserMessage("what is this?", (IMAGE, DOC))])
    parts = server.requests[0]["contents"][0]["parts"]
    assert parts[0] == {"text": "what is this?"}
    assert _mime(parts[1]) == "image/png"
    assert _mime(parts[2]) == "application/pdf"
    received = scripted.calls[0].messages[-1]
    assert isinstance(received, UserMessage) and received.content == "what is this?"
    assert [p.data for p in received.parts] == [PNG, PDF]


@pytest.mark.parametrize(("name", "inside"), [("gemini-3-pro", True), ("gemini-2.5-flash", False)])
async def test_a_tool_results_image_reaches_the_model(gemini: Any, name: str, inside: bool) -> None:
    scripted = ScriptedModel([call_tool("shot", {}, id="c1"), "seen"])
    server = gemini(scripted)
    model = _model(server, name)
    history: list[Message] = [UserMessage("screenshot")]
    reply = await model.complete(history, [SHOT])
    call = reply.message.tool_calls[0]
    history += [reply.message, ToolResultMessage(call.id, "shot", "the screen", parts=(IMAGE,))]
    answer = await model.complete(history, [SHOT])
    assert answer.message.content == "seen"
    parts = server.requests[1]["contents"][-1]["parts"]
    response = parts[0]["functionResponse"]
    if inside:  # Gemini 3: multimodal function responses
        assert _mime(response["parts"][0]) == "image/png"
        assert len(parts) == 1
    else:
        assert "parts" not in response
        assert _mime(parts[1]) == "image/png"
    result = scripted.calls[1].messages[-1]
    assert isinstance(result, ToolResultMessage) and result.content == "the screen"
    assert [p.data for p in result.parts] == [PNG]
