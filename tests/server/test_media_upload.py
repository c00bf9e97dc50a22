"""Images and PDFs uploaded to the native API (multipart/form-data) against a real server:
they reach the model, are stored as content-addressed files and shown back in the
history; a corrupt, unsupported or oversized file, or a full media store, is a one-line 4xx
(507 for the full store) and nothing runs."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import pytest
from serverkit import Serve, ServerThread

from retinue.messages import DocumentPart, ImagePart, UserMessage
from retinue.testing import ScriptedModel

pytestmark = pytest.mark.timeout(60)
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8
PDF = b"%PDF-1.7\n1 0 obj << /Type /Page >> endobj\n%%EOF\n"


def home_of(server: ServerThread) -> Path:
    return server.runtime.settings.home


def stored_files(server: ServerThread) -> set[str]:
    return {p.name for p in (home_of(server) / "media").glob("??/*")}


def test_uploaded_files_reach_the_model_are_stored_and_shown(serve: Serve) -> None:
    model = ScriptedModel(["a chart and a report"])
    server = serve(model, memory=True)
    files = [
        ("files", ("chart.png", PNG, "image/png")),
        ("files", ("report.pdf", PDF, "application/octet-stream")),  # type read from bytes
    ]
    with server.client() as client:
        reply = client.post(
            "/v1/conversations/up/messages/upload", data={"content": "what are these?"}, files=files
        )
        assert reply.status_code == 200, reply.text
        assert reply.json()["content"] == "a chart and a report"
        shown = client.get("/v1/conversations/up").json()["messages"]
    asked = model.calls[0].messages[-1]
    assert isinstance(asked, UserMessage) and asked.content == "what are these?"
    assert asked.parts == (
        ImagePart("image/png", PNG, name="chart.png"),
        DocumentPart("application/pdf", PDF, name="report.pdf"),
    )
    assert stored_files(server) == {hashlib.sha256(b).hexdigest() for b in (PNG, PDF)}
    [user] = [m for m in shown if m["role"] == "user"]
    assert [(p["type"], p["name"], base64.b64decode(p["data"])) for p in user["parts"]] == [
        ("image", "chart.png", PNG),
        ("document", "report.pdf", PDF),
    ]
    with server.client() as client:
        assert client.delete("/v1/conversations/up").status_code == 200
    assert stored_files(server) == set()  # the conversation's files went with it


@pytest.mark.parametrize(
    ("upload", "status", "says"),
    [
        (("x.png", b"not a png at all", "image/png"), 400, "corrupt image"),
        (("x.bmp", b"BM\x00\x00", "image/bmp"), 400, "unsupported media type 'image/bmp'"),
        (("x.bin", b"\x00\x01\x02", "application/octet-stream"), 400, "unsupported media type"),
    ],
)
def test_a_bad_file_is_a_one_line_4xx_and_nothing_runs(
    serve: Serve, upload: tuple[str, bytes, str], status: int, says: str
) -> None:
    model = ScriptedModel([])
    server = serve(model, memory=True)
    with server.client() as client:
        reply = client.post(
            "/v1/conversations/bad/messages/upload",
            data={"content": "look"},
            files=[("files", upload)],
        )
        listed = client.get("/v1/conversations").json()["conversations"]
    assert reply.status_code == status and says in reply.json()["error"]
    assert "\n" not in reply.json()["error"] and upload[0] in reply.json()["error"]
    assert not model.calls and listed == []


def test_a_message_the_media_store_has_no_room_for_is_refused_before_it_runs(
    serve: Serve, tmp_path: Path
) -> None:
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "config.toml").write_text(f"media_max_bytes = {len(PNG) + 100}\n")
    model = ScriptedModel(["one picture"])
    server = serve(model, memory=True)
    with server.client() as client:
        first = client.post(
            "/v1/conversations/a/messages/upload",
            data={"content": "look"},
            files=[("files", ("a.png", PNG, "image/png"))],
        )
        second = client.post(
            "/v1/conversations/b/messages/upload",
            data={"content": "and this"},
            files=[("files", ("b.png", PNG + b"more", "image/png"))],
        )
        streamed = client.post(
            "/v1/conversations/c/messages/upload?stream=true",
            data={"content": "and this"},
            files=[("files", ("b.png", PNG + b"more", "image/png"))],
        )
        listed = [c["id"] for c in client.get("/v1/conversations").json()["conversations"]]
    assert first.status_code == 200
    assert second.status_code == 507 and "media store full" in second.json()["error"]
    assert "\n" not in second.json()["error"]
    assert streamed.status_code == 507  # refused before its stream begins
    assert len(model.calls) == 1 and listed == ["a"]


def test_media_routes_take_larger_bodies_than_the_rest(serve: Serve) -> None:
    model = ScriptedModel(["big"])
    server = serve(model)
    big = PNG + bytes(1_200_000)  # over the 1 MB limit of the other routes
    image = {"type": "image", "media_type": "image/png", "data": base64.b64encode(big).decode()}
    with server.client() as client:
        taken = client.post("/v1/conversations/m/messages", json={"content": "x", "parts": [image]})
        refused = client.post(
            "/v1/conversations/m/approvals/a1", json={"allow": True, "message": "x" * 1_200_000}
        )
    assert taken.status_code == 200 and taken.json()["content"] == "big"
    assert refused.status_code == 413 and "request body over 1000000 bytes" in refused.text
    assert [len(p.data) for p in model.calls[0].messages[-1].parts] == [len(big)]  # type: ignore[union-attr]
