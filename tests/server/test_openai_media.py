"""The OpenAI-compatible endpoint's images and files, through the official ``openai`` SDK
against a real server: the Responses spellings (``input_image``, ``input_file``) next to
Chat Completions' parts, a conversation's stored images kept as files, and one-line 400s
for what is not taken (a file id, an audio part, an http URL)."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import openai
import pytest
from serverkit import Serve, ServerThread

from retinue.messages import DocumentPart, ImagePart, UserMessage
from retinue.testing import ScriptedModel

pytestmark = pytest.mark.timeout(60)
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(200))
GIF = b"GIF89a" + bytes(50)
PDF = b"%PDF-1.7\n1 0 obj << /Type /Page >> endobj\n%%EOF\n"


def sdk(server: ServerThread) -> openai.OpenAI:
    return openai.OpenAI(api_key=server.token, base_url=f"{server.url}/v1", max_retries=0)


def data_url(media_type: str, data: bytes) -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode()}"


def test_responses_spellings_and_a_bare_image_url_reach_the_agent(serve: Serve) -> None:
    model = ScriptedModel(["three things"])
    client = sdk(serve(model, memory=True))
    content: list[Any] = [
        {"type": "input_text", "text": "what are these?"},
        {"type": "input_image", "image_url": data_url("image/png", PNG)},
        {"type": "input_file", "filename": "r.pdf", "file_data": data_url("application/pdf", PDF)},
        {"type": "image_url", "image_url": data_url("image/gif", GIF)},  # a string, not {url}
    ]
    reply = client.chat.completions.with_raw_response.create(
        model="retinue",
        messages=[{"role": "user", "content": content}],
        extra_headers={"X-Retinue-Conversation": "pics"},
    )
    assert reply.parse().choices[0].message.content == "three things"
    asked = model.calls[0].messages[-1]
    assert isinstance(asked, UserMessage) and asked.content == "what are these?"
    assert asked.parts == (
        ImagePart("image/png", PNG),
        DocumentPart("application/pdf", PDF, name="r.pdf"),
        ImagePart("image/gif", GIF),
    )
    assert reply.headers["X-Retinue-Conversation"] == "pics"


def test_a_stored_conversation_keeps_its_images_as_files(serve: Serve) -> None:
    model = ScriptedModel(["a chart"])
    server = serve(model, memory=True)
    sdk(server).chat.completions.create(
        model="retinue",
        messages=[{"role": "user", "content": [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": data_url("image/png", PNG)}},
        ]}],
        extra_headers={"X-Retinue-Conversation": "kept"},
    )  # fmt: skip
    home = server.runtime.settings.home
    digest = hashlib.sha256(PNG).hexdigest()
    assert (home / "media" / digest[:2] / digest).read_bytes() == PNG
    with server.client() as client:
        [user] = [m for m in client.get("/v1/conversations/kept").json()["messages"]
                  if m["role"] == "user"]  # fmt: skip
    assert base64.b64decode(user["parts"][0]["data"]) == PNG


@pytest.mark.parametrize(
    ("part", "says"),
    [
        ({"type": "file", "file": {"file_id": "file-abc123"}}, "give file_data"),
        ({"type": "input_file", "file_url": "https://example.com/r.pdf"}, "give file_data"),
        ({"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
         "unsupported content part 'input_audio'"),
        ({"type": "image_url", "image_url": {"url": "http://169.254.169.254/x.png"}},
         "not fetched"),
        ({"type": "file", "file": {"file_data": data_url("text/plain", b"hello")}},
         "unsupported"),
    ],
)  # fmt: skip
def test_what_is_not_taken_is_a_one_line_400_and_nothing_runs(
    serve: Serve, part: dict[str, Any], says: str
) -> None:
    model = ScriptedModel([])
    client = sdk(serve(model))
    with pytest.raises(openai.BadRequestError, match=says) as info:
        client.chat.completions.create(
            model="retinue",
            messages=[{"role": "user", "content": [{"type": "text", "text": "look"}, part]}],  # type: ignore[list-item]
        )
    assert "\n" not in info.value.message and not model.calls


def test_a_role_model_is_told_images_go_to_the_main_agent(serve: Serve) -> None:
    model = ScriptedModel([])
    client = sdk(serve(model))
    image = {"type": "image_url", "image_url": {"url": data_url("image/png", PNG)}}
    with pytest.raises(openai.BadRequestError, match="main agent"):
        client.chat.completions.create(
            model="retinue/slowpoke",
            messages=[{"role": "user", "content": [{"type": "text", "text": "x"}, image]}],  # type: ignore[list-item]
        )
    assert not model.calls


def test_images_of_earlier_messages_reach_a_new_conversation_after_its_transcript(
    serve: Serve,
) -> None:
    model = ScriptedModel(["the same chart"])
    client = sdk(serve(model))
    earlier: list[Any] = [
        {"type": "text", "text": "here is a chart"},
        {"type": "image_url", "image_url": {"url": data_url("image/png", PNG)}},
    ]
    client.chat.completions.create(
        model="retinue",
        messages=[
            {"role": "user", "content": earlier},
            {"role": "assistant", "content": "a chart of sales"},
            {"role": "user", "content": [
                {"type": "text", "text": "and this one?"},
                {"type": "image_url", "image_url": {"url": data_url("image/gif", GIF)}},
            ]},
        ],
    )  # fmt: skip
    asked = model.calls[0].messages[-1]
    assert isinstance(asked, UserMessage)
    assert "[user] here is a chart [+1 attached: after this transcript]" in asked.content
    assert asked.parts == (ImagePart("image/png", PNG), ImagePart("image/gif", GIF))
