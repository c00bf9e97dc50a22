"""Images and PDFs in each provider's request shape, and the note a model without vision
gets instead (plain functions, no I/O).

Documented shapes: Chat Completions ``image_url`` (a data URL) and ``file`` parts; Responses
``input_image`` / ``input_file``; Anthropic ``image`` / ``document`` blocks (in
``tool_result`` content too); Gemini ``inline_data`` / ``file_data`` parts (and
``functionResponse.parts``). A model whose name says it reads no images (:func:`sees_media`)
gets one line of text naming each part instead, never a failed request.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Sequence
from typing import Any

from retinue.messages import (
    DocumentPart,
    ImagePart,
    MediaPart,
    Message,
    ToolResultMessage,
    UserMessage,
)

__all__ = [
    "anthropic_block",
    "chat_part",
    "data_url",
    "gemini_part",
    "has_media",
    "note",
    "responses_part",
    "sees_media",
    "without_media",
]

# text-only families (lower-cased bare names); every other model is taken to read images
_TEXT_ONLY = re.compile(
    r"gpt-3\.5|(?<![a-z0-9])o1-mini|(?<![a-z0-9])o3-mini|deepseek|qwen(?!.*vl)|codestral"
    r"|llama-?[23](?!.*vision)|^local:|^scripted:text"
)


def sees_media(model: str) -> bool:
    """Whether ``model`` (``provider:name`` or a bare name) accepts images and documents."""
    return not _TEXT_ONLY.search(model.lower())


def note(part: MediaPart, model: str) -> str:
    """The one line a model without vision reads in place of ``part``."""
    return f"[{part.label} not sent: {model or 'this model'} does not accept images or files]"


def has_media(messages: Sequence[Message]) -> bool:
    return any(isinstance(m, UserMessage | ToolResultMessage) and m.parts for m in messages)


def without_media(messages: Sequence[Message], model: str) -> Sequence[Message]:
    """``messages`` with every part turned into its :func:`note` when ``model`` cannot read
    it; the same sequence when there is nothing to change."""
    if sees_media(model) or not has_media(messages):
        return messages
    out: list[Message] = []
    for m in messages:
        if isinstance(m, UserMessage | ToolResultMessage) and m.parts:
            text = "\n".join([m.content, *(note(p, model) for p in m.parts)]).lstrip("\n")
            m = (
                UserMessage(text)
                if isinstance(m, UserMessage)
                else ToolResultMessage(m.tool_call_id, m.name, text, m.is_error)
            )
        out.append(m)
    return out


def data_url(part: MediaPart) -> str:
    """The part's URL, or its bytes as a ``data:`` URL."""
    if part.url:
        return part.url
    return f"data:{part.media_type};base64,{base64.b64encode(part.data).decode('ascii')}"


def _b64(part: MediaPart) -> str:
    return base64.b64encode(part.data).decode("ascii")


def _filename(part: MediaPart) -> str:
    return part.name or "document.pdf"


def chat_part(part: MediaPart) -> dict[str, Any]:
    """A Chat Completions content part: ``image_url``, or ``file`` with ``file_data``."""
    if isinstance(part, ImagePart):
        return {"type": "image_url", "image_url": {"url": data_url(part)}}
    if part.url:  # Chat Completions takes a file by data or by uploaded id only
        return {"type": "text", "text": f"[{part.label}: {part.url}]"}
    return {"type": "file", "file": {"filename": _filename(part), "file_data": data_url(part)}}


def responses_part(part: MediaPart) -> dict[str, Any]:
    """A Responses input content part: ``input_image`` or ``input_file``."""
    if isinstance(part, ImagePart):
        return {"type": "input_image", "image_url": data_url(part), "detail": "auto"}
    if part.url:
        return {"type": "input_file", "file_url": part.url}
    return {"type": "input_file", "filename": _filename(part), "file_data": data_url(part)}


def anthropic_block(part: MediaPart) -> dict[str, Any]:
    """An Anthropic ``image`` or ``document`` block (base64 or URL source)."""
    kind = "image" if isinstance(part, ImagePart) else "document"
    if part.url:
        return {"type": kind, "source": {"type": "url", "url": part.url}}
    source = {"type": "base64", "media_type": part.media_type, "data": _b64(part)}
    return {"type": kind, "source": source}


def gemini_part(part: MediaPart) -> dict[str, Any]:
    """A Gemini part: ``inline_data`` (the bytes; the SDK encodes them) or ``file_data``."""
    if part.url:
        return {"file_data": {"mime_type": part.media_type, "file_uri": part.url}}
    return {"inline_data": {"mime_type": part.media_type, "data": part.data}}


def is_document(part: MediaPart) -> bool:
    return isinstance(part, DocumentPart)


# -- the reverse, for the loopback emulators: a documented shape or a ValueError -----------

_DATA_URL = re.compile(r"data:([a-z]+/[a-z0-9.+-]+);base64,([A-Za-z0-9+/=]*)\Z")


def _from_data_url(url: Any, name: str = "") -> MediaPart:
    if not isinstance(url, str):
        raise ValueError(f"a media url must be a string, not {type(url).__name__}")
    if url.startswith(("https://", "http://")):
        raise ValueError("a URL is not fetched here; send the bytes as a base64 data URL")
    match = _DATA_URL.match(url)
    if match is None:
        raise ValueError(f"not a base64 data URL: {url[:40]!r}")
    return _part(match.group(1), base64.b64decode(match.group(2), validate=True), name)


def _part(media_type: str, data: bytes, name: str = "") -> MediaPart:
    if media_type == "application/pdf":
        return DocumentPart(media_type, data, name=name)
    return ImagePart(media_type, data, name=name)


def chat_media(p: dict[str, Any]) -> MediaPart | None:
    """A Chat Completions content part's media (``None`` for text)."""
    if p.get("type") == "image_url":
        return _from_data_url(p["image_url"]["url"])
    if p.get("type") == "file":
        return _from_data_url(p["file"]["file_data"], str(p["file"].get("filename", "")))
    if p.get("type") != "text":
        raise ValueError(f"unknown content part type {p.get('type')!r}")
    return None


def responses_media(p: dict[str, Any]) -> MediaPart | None:
    """A Responses input content part's media (``None`` for text)."""
    if p.get("type") == "input_image":
        return _from_data_url(p["image_url"])
    if p.get("type") == "input_file":
        return _from_data_url(p["file_data"], str(p.get("filename", "")))
    if p.get("type") not in ("input_text", "output_text"):
        raise ValueError(f"unknown input content type {p.get('type')!r}")
    return None


def anthropic_media(block: dict[str, Any]) -> MediaPart | None:
    """An Anthropic content block's media (``None`` for other blocks)."""
    if block.get("type") not in ("image", "document"):
        return None
    source = block["source"]
    if source.get("type") != "base64":
        raise ValueError(f"{block['type']} source type {source.get('type')!r} not emulated")
    data = base64.b64decode(str(source["data"]), validate=True)
    media = _part(str(source["media_type"]), data)
    if (block["type"] == "document") != isinstance(media, DocumentPart):
        raise ValueError(f"a {block['type']} block cannot hold {source['media_type']}")
    return media


def gemini_media(part: dict[str, Any]) -> MediaPart | None:
    """A Gemini part's inline media as the REST API carries it (``None`` for other parts)."""
    blob = part.get("inlineData", part.get("inline_data"))
    if blob is None:
        return None
    media_type = blob.get("mimeType", blob.get("mime_type"))
    data = str(blob["data"]).translate(_URLSAFE)  # the SDK writes bytes URL-safe
    return _part(str(media_type), base64.b64decode(data, validate=True))


_URLSAFE = str.maketrans("-_", "+/")
