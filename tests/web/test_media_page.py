"""Images and PDFs on the web page, in a real browser (Debian's Chromium) against a live
server: picked or dropped files show as thumbnails before sending, reach the model, stay in
the transcript after a reload; a file the server refuses is an error and stays in the
composer."""

from __future__ import annotations

import base64
import importlib
import struct
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from retinue.messages import DocumentPart, ImagePart, ToolResultMessage, UserMessage
from retinue.testing import ScriptedModel, call_tool

pytestmark = pytest.mark.timeout(60)
page_kit = importlib.import_module("test_page")
pages = page_kit.pages  # the fixture: fresh pages that may not throw or break the CSP
signed_in, shot = page_kit.signed_in, page_kit.shot
Serve = Callable[..., Any]
PDF = b"%PDF-1.7\n1 0 obj << /Type /Page >> endobj\n%%EOF\n"


def png(width: int = 24, height: int = 16) -> bytes:
    """A real (decodable) red PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"".join([
        b"\x89PNG\r\n\x1a\n", chunk(b"IHDR", header), chunk(b"IDAT", zlib.compress(rows)),
        chunk(b"IEND", b""),
    ])  # fmt: skip


def drop(page: Page, name: str, media_type: str, data: bytes) -> None:
    """Drop a file on the composer, as a user dragging it from the desktop does."""
    page.evaluate(
        """([name, type, b64]) => {
            const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
            const transfer = new DataTransfer();
            transfer.items.add(new File([bytes], name, { type }));
            const target = document.getElementById("composer");
            for (const kind of ["dragover", "drop"]) {
              const init = { dataTransfer: transfer, bubbles: true, cancelable: true };
              target.dispatchEvent(new DragEvent(kind, init));
            }
        }""",
        [name, media_type, base64.b64encode(data).decode()],
    )


def test_picked_and_dropped_files_are_shown_sent_and_kept(
    serve: Serve, pages: Callable[[], Page]
) -> None:
    image = png()
    model = ScriptedModel(["A red rectangle and a one-page PDF."])
    server = serve(model)
    page = signed_in(pages(), server)
    page.set_input_files(
        "#file", files=[{"name": "red.png", "mimeType": "image/png", "buffer": image}]
    )
    drop(page, "report.pdf", "application/pdf", PDF)
    expect(page.locator("#attachments li")).to_have_count(2)
    expect(page.locator("#attachments img")).to_have_attribute("alt", "red.png")
    expect(page.locator("#attachments")).to_contain_text("report.pdf")
    shot(page, "media-before-sending.png")

    page.fill("#input", "What are these?")
    page.press("#input", "Enter")
    reply = page.locator("#messages .msg-assistant .text").last
    expect(reply).to_have_text("A red rectangle and a one-page PDF.")
    expect(page.locator("#attachments")).to_be_hidden()  # sent: the composer is empty again
    asked = model.calls[0].messages[-1]
    assert isinstance(asked, UserMessage) and asked.content == "What are these?"
    assert asked.parts == (
        ImagePart("image/png", image, name="red.png"),
        DocumentPart("application/pdf", PDF, name="report.pdf"),
    )
    thumb = page.locator("#messages .msg-user .thumbs img")
    expect(thumb).to_have_attribute("alt", "red.png")
    assert thumb.evaluate("img => img.naturalWidth") == 24  # a real picture, decoded

    page.reload()  # the transcript comes back from the stored history
    cid = page.locator("#chat-title").get_attribute("data-cid")
    page.locator(f'#conversation-list button[data-cid="{cid}"]').click()
    expect(page.locator("#messages .msg-user .thumbs img")).to_have_attribute("alt", "red.png")
    expect(page.locator("#messages .msg-user .thumbs")).to_contain_text("report.pdf")
    shot(page, "media-in-transcript.png")


def test_a_refused_file_is_an_error_and_stays_in_the_composer(
    serve: Serve, pages: Callable[[], Page]
) -> None:
    model = ScriptedModel([])
    server = serve(model)
    page = signed_in(pages(), server)
    fake = {"name": "fake.png", "mimeType": "image/png", "buffer": b"this is not a png"}
    page.set_input_files("#file", files=[fake])
    page.set_input_files(
        "#file", files=[{"name": "notes.txt", "mimeType": "text/plain", "buffer": b"hi"}]
    )
    expect(page.locator("#error-text")).to_contain_text("Not sent: notes.txt")
    expect(page.locator("#attachments li")).to_have_count(1)  # the text file was not taken
    page.fill("#input", "look")
    page.press("#input", "Enter")
    expect(page.locator("#error-text")).to_contain_text("corrupt image")
    expect(page.locator("#attachments li")).to_have_count(1)  # kept, to fix and send again
    assert not model.calls


def test_a_pasted_image_and_one_a_tool_returned_show_as_thumbnails(
    serve: Serve, pages: Callable[[], Page], tmp_path: Path
) -> None:
    (tmp_path / "shot.png").write_bytes(png(30, 20))
    model = ScriptedModel([call_tool("Read", {"file_path": "shot.png"}), "Both are red."])
    server = serve(model)
    page = signed_in(pages(), server)
    page.evaluate(
        """(b64) => {
            const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
            const transfer = new DataTransfer();
            transfer.items.add(new File([bytes], "pasted.png", { type: "image/png" }));
            const init = { clipboardData: transfer, bubbles: true, cancelable: true };
            document.getElementById("input").dispatchEvent(new ClipboardEvent("paste", init));
        }""",
        base64.b64encode(png()).decode(),
    )
    expect(page.locator("#attachments img")).to_have_attribute("alt", "pasted.png")
    page.fill("#input", "Compare with shot.png")
    page.press("#input", "Enter")
    expect(page.locator("#messages .msg-assistant .text").last).to_have_text("Both are red.")
    read = model.calls[1].messages[-1]
    assert isinstance(read, ToolResultMessage) and [p.media_type for p in read.parts] == [
        "image/png"
    ]
    page.reload()  # the tool's image comes back with the stored history
    cid = page.locator("#chat-title").get_attribute("data-cid")
    page.locator(f'#conversation-list button[data-cid="{cid}"]').click()
    tool = page.locator('#messages details[data-tool="Read"]')
    tool.locator("summary").click()
    expect(tool.locator(".thumbs img")).to_have_count(1)
    assert tool.locator(".thumbs img").evaluate("img => img.naturalWidth") == 30
