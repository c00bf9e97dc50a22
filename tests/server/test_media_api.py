"""Images and PDFs over HTTP: the OpenAI-compatible endpoint's ``image_url`` and ``file`` parts
(base64 data URLs, through the official ``openai`` SDK) and the native API's ``parts``, against
a real server."""

from __future__ import annotations

import base64
from typing import Any

import openai
import pytest
from serverkit import Serve, ServerThread

from retinue.messages import DocumentPart, ImagePart, UserMessage
from retinue.testing import ScriptedModel

pytestmark = pytest.mark.timeout(60)
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))
PDF = b"%PDF-1.7\n1 0 obj << /Type /Page >> endobj\n%%EOF\n"


def sdk(server: ServerThread) -> openai.OpenAI:
    return openai.OpenAI(api_key=server.token, base_url=f"{server.url}/v1", max_retries=0)


def data_url(media_type: str, data: bytes) -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode()}"


def test_image_url_and_file_parts_reach_the_main_agent(serve: Serve) -> None:
    model = ScriptedModel(["a chart and a report"])
    client = sdk(serve(model))
    pdf: dict[str, Any] = {"filename": "r.pdf", "file_data": data_url("application/pdf", PDF)}
    messages: list[Any] = [{"role": "user", "content": [
            {"type": "text", "text": "what are these?"},
            {"type": "image_url", "image_url": {"url": data_url("image/png", PNG)}},
            {"type": "file", "file": pdf},
    ]}]  # fmt: skip
    reply = client.chat.completions.create(model="retinue", messages=messages)
    assert reply.choices[0].message.content == "a chart and a report"
    asked = model.calls[0].messages[-1]
    assert isinstance(asked, UserMessage) and asked.content == "what are these?"
    assert [type(p) for p in asked.parts] == [ImagePart, DocumentPart]
    assert [p.data for p in asked.parts] == [PNG, PDF]


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("https://example.com/cat.png", "not fetched"),
        (data_url("image/png", b"not a png"), "corrupt image"),
        (data_url("image/bmp", b"BM...."), "unsupported"),
    ],
)
def test_a_bad_image_part_is_a_400_and_nothing_runs(serve: Serve, url: str, says: str) -> None:
    model = ScriptedModel([])
    client = sdk(serve(model))
    with pytest.raises(openai.BadRequestError, match=says) as info:
        client.chat.completions.create(
            model="retinue",
            messages=[{"role": "user", "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": url}},
            ]}],
        )  # fmt: skip
    assert "\n" not in str(info.value)
    assert not model.calls


def test_the_native_api_takes_parts_and_refuses_a_corrupt_one(serve: Serve) -> None:
    model = ScriptedModel(["a chart"])
    server = serve(model)
    image = {"type": "image", "media_type": "image/png", "data": base64.b64encode(PNG).decode()}
    corrupt = {**image, "data": base64.b64encode(b"not a png").decode()}
    with server.client() as client:
        bad = client.post(
            "/v1/conversations/m/messages", json={"content": "look", "parts": [corrupt]}
        )
        good = client.post(
            "/v1/conversations/m/messages", json={"content": "look", "parts": [image]}
        )
    assert bad.status_code == 400 and "corrupt image" in bad.text
    assert good.status_code == 200 and good.json()["content"] == "a chart"
    [call] = model.calls
    asked = call.messages[-1]
    assert isinstance(asked, UserMessage) and [p.data for p in asked.parts] == [PNG]
