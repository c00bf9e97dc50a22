"""Images and PDFs in from the caller and out of tools: ``run([text, image])``, a tool that
returns PNG bytes or a ``ToolResult``, ``Read`` of an image or a PDF, MCP image results."""

from __future__ import annotations

import base64
from pathlib import Path

import mcp_types as types
import pytest

from retinue import Agent, DocumentPart, ImagePart, MediaError, ToolContext, ToolResult, tool
from retinue.mcp.tools import render_result, result_media
from retinue.messages import ToolResultMessage, UserMessage
from retinue.testing import ScriptedModel, call_tool

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))
GIF = b"GIF89a" + bytes(32)
PDF = b"%PDF-1.7\n1 0 obj << /Type /Page >> endobj\n%%EOF\n"


def agent_for(model: ScriptedModel, tmp_path: Path, **kw: object) -> Agent:
    return Agent(model, workspace=tmp_path, home=tmp_path / "home", memory=False, **kw)  # type: ignore[arg-type]


def test_run_takes_text_with_an_image_bytes_and_a_pdf_path(tmp_path: Path) -> None:
    (tmp_path / "report.pdf").write_bytes(PDF)
    model = ScriptedModel(["a chart and a report"])
    with agent_for(model, tmp_path, builtin_tools=False) as agent:
        out = agent.run_sync(["What are these?", PNG, tmp_path / "report.pdf"])
    assert out.content == "a chart and a report"
    asked = model.calls[0].messages[-1]
    assert isinstance(asked, UserMessage) and asked.content == "What are these?"
    assert [type(p) for p in asked.parts] == [ImagePart, DocumentPart]
    assert asked.parts[1].name == "report.pdf" and asked.parts[1].data == PDF


def test_bad_media_is_a_one_line_error_and_the_agent_goes_on(tmp_path: Path) -> None:
    model = ScriptedModel(["fine"])
    with agent_for(model, tmp_path, builtin_tools=False) as agent:
        with pytest.raises(MediaError, match="unsupported media type") as info:
            agent.run_sync(["look", b"PK\x03\x04 a zip"])
        assert "\n" not in str(info.value)
        with pytest.raises(MediaError, match="corrupt image"):
            agent.run_sync(["look", ImagePart("image/jpeg", PNG)])
        assert agent.run_sync("still there?").content == "fine"
    assert len(model.calls) == 1  # nothing half-sent


def test_a_tool_returning_png_bytes_reaches_the_model_as_an_image(tmp_path: Path) -> None:
    @tool
    def screenshot(ctx: ToolContext) -> bytes:
        """Take a screenshot."""
        return PNG

    @tool
    def chart(ctx: ToolContext) -> ToolResult:
        """Draw a chart."""
        return ToolResult(["the chart", ImagePart("image/gif", GIF, name="c.gif")])

    model = ScriptedModel([call_tool("screenshot"), call_tool("chart"), "seen both"])
    with agent_for(model, tmp_path, tools=[screenshot, chart], builtin_tools=False) as agent:
        assert agent.run_sync("show me").content == "seen both"
    shot = model.calls[1].messages[-1]
    assert isinstance(shot, ToolResultMessage) and not shot.is_error
    assert shot.content == "" and [p.data for p in shot.parts] == [PNG]
    drawn = model.calls[2].messages[-1]
    assert isinstance(drawn, ToolResultMessage) and drawn.content == "the chart"
    assert [p.media_type for p in drawn.parts] == ["image/gif"]


def test_read_returns_an_image_or_a_pdf_and_refuses_other_binaries(tmp_path: Path) -> None:
    (tmp_path / "shot.png").write_bytes(PNG)
    (tmp_path / "doc.pdf").write_bytes(PDF)
    (tmp_path / "blob.bin").write_bytes(b"\x00\x01binary")
    calls = [call_tool("Read", {"file_path": n}) for n in ("shot.png", "doc.pdf", "blob.bin")]
    model = ScriptedModel([*calls, "done"])
    with agent_for(model, tmp_path) as agent:
        agent.run_sync("read them")
    png, pdf, blob = (c.messages[-1] for c in model.calls[1:])
    assert isinstance(png, ToolResultMessage) and png.content.startswith("shot.png (image/png")
    assert [p.data for p in png.parts] == [PNG]
    assert isinstance(pdf, ToolResultMessage) and isinstance(pdf.parts[0], DocumentPart)
    assert isinstance(blob, ToolResultMessage) and blob.is_error and not blob.parts
    assert "binary file" in blob.content


def test_read_refuses_an_image_over_its_size_limit(tmp_path: Path) -> None:
    from retinue.tools.builtin.fs import READ_MEDIA_MAX_BYTES

    (tmp_path / "huge.png").write_bytes(PNG + bytes(READ_MEDIA_MAX_BYTES))
    model = ScriptedModel([call_tool("Read", {"file_path": "huge.png"}), "ok"])
    with agent_for(model, tmp_path) as agent:
        agent.run_sync("read it")
    result = model.calls[1].messages[-1]
    assert isinstance(result, ToolResultMessage) and result.is_error and not result.parts
    assert "too large to show" in result.content and "\n" not in result.content


def test_mcp_image_results_pass_through() -> None:
    encoded = base64.b64encode(PNG).decode()
    result = types.CallToolResult(
        content=[
            types.TextContent(type="text", text="a screenshot"),
            types.ImageContent(type="image", data=encoded, mime_type="image/png"),
            types.ImageContent(type="image", data=encoded, mime_type="image/tiff"),
        ]
    )
    assert [p.data for p in result_media(result)] == [PNG]
    assert render_result(result).splitlines() == [
        "a screenshot",
        f"[image: image/tiff, {len(encoded) * 3 // 4} bytes, not shown]",
    ]


def test_read_refuses_a_pdf_over_its_page_limit(tmp_path: Path) -> None:
    from retinue.tools.builtin.fs import READ_PDF_MAX_PAGES

    pages = b"".join(b"%d 0 obj << /Type /Page >> endobj\n" % n for n in range(101))
    (tmp_path / "long.pdf").write_bytes(b"%PDF-1.7\n" + pages + b"%%EOF\n")
    model = ScriptedModel([call_tool("Read", {"file_path": "long.pdf"}), "ok"])
    with agent_for(model, tmp_path) as agent:
        agent.run_sync("read it")
    result = model.calls[1].messages[-1]
    assert isinstance(result, ToolResultMessage) and result.is_error and not result.parts
    assert f"has 101 pages; Read shows PDFs of up to {READ_PDF_MAX_PAGES}" in result.content
