"""Provider-neutral conversation messages, tool calls and token usage.

Messages are small immutable records (``slots`` dataclasses, so an idle session with a long
history costs little more than its text). ``to_dict`` / ``from_dict`` give the stable JSON
form of a conversation that transcripts, the HTTP API and the CLI use.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any, Literal, TypeAlias

from retinue.errors import MediaError

__all__ = [
    "MAX_MEDIA_BYTES",
    "AssistantMessage",
    "Content",
    "DocumentPart",
    "ImagePart",
    "MediaPart",
    "Message",
    "ReasoningPart",
    "SystemMessage",
    "ToolCall",
    "ToolResultMessage",
    "Usage",
    "UserMessage",
    "dumps_conversation",
    "from_dict",
    "history_problems",
    "is_media",
    "loads_conversation",
    "media_part",
    "message_text_size",
    "pdf_pages",
    "shown_dict",
    "to_dict",
    "user_content",
]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A model's request to run one tool. ``arguments`` is the raw JSON text the model wrote."""

    id: str
    name: str
    arguments: str = "{}"


@dataclass(frozen=True, slots=True)
class ReasoningPart:
    """An opaque piece of a model's reasoning, sent back only to the provider (and model)
    that made it, verbatim.

    ``data`` is the provider's own JSON for it, unchanged (Anthropic's ``signature`` or
    ``data``, OpenAI's reasoning item ``id`` and ``encrypted_content``, Gemini's thought
    signature); ``text`` is the readable thinking or summary, for display only.
    """

    provider: str  # "anthropic" | "openai" | "gemini"
    model: str  # the model that produced it, as the provider named it
    kind: str  # "thinking" | "redacted_thinking" | "reasoning" | "thought_signature"
    data: dict[str, Any] = field(hash=False)  # compared, not hashed: messages stay hashable
    text: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "model": self.model,
            "kind": self.kind,
            "data": self.data,
            "text": self.text,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ReasoningPart:
        payload = data.get("data")
        return cls(
            str(data["provider"]),
            str(data.get("model", "")),
            str(data["kind"]),
            dict(payload) if isinstance(payload, dict) else {},
            str(data.get("text") or ""),
        )


MAX_MEDIA_BYTES = 20 * 2**20
"""The most bytes one image or document may carry (the providers' own limits are 5-50 MB)."""
IMAGE_TOKENS = 1_600
"""The token estimate of one image (a 1092x1092 picture costs about this on every provider)."""
DOCUMENT_PAGE_TOKENS = 1_500
"""The token estimate of one page of a PDF (text plus its page image)."""

_IMAGE_MAGIC = {
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "image/webp": (b"RIFF",),
}
_DOCUMENT_MAGIC = {"application/pdf": (b"%PDF-",)}


def _check_media(kind: str, media_type: str, data: bytes, url: str, known: dict[str, Any]) -> None:
    if media_type not in known:
        raise MediaError(
            f"unsupported {kind} media type {media_type!r} (one of {', '.join(sorted(known))})"
        )
    if bool(data) == bool(url):
        raise MediaError(f"{kind} part: give either data or a url, not both or neither")
    if url and not url.startswith(("https://", "http://")):
        raise MediaError(f"{kind} part: the url must be http(s), not {url[:40]!r}")
    if len(data) > MAX_MEDIA_BYTES:
        raise MediaError(f"{kind} too large: {len(data):,} bytes (at most {MAX_MEDIA_BYTES:,})")
    if data and not data.startswith(known[media_type]):
        raise MediaError(f"corrupt {kind}: the bytes are not {media_type}")
    if media_type == "image/webp" and data and data[8:12] != b"WEBP":
        raise MediaError("corrupt image: the bytes are not image/webp")


@dataclass(frozen=True, slots=True)
class ImagePart:
    """An image in a user message or a tool result: its bytes (PNG, JPEG, GIF or WebP, checked
    by their first bytes) or an http(s) URL the provider fetches. ``name`` is for display."""

    media_type: str
    data: bytes = field(default=b"", repr=False)
    url: str = ""
    name: str = ""

    def __post_init__(self) -> None:
        _check_media("image", self.media_type, self.data, self.url, _IMAGE_MAGIC)

    @property
    def label(self) -> str:
        """A one-line description: ``image photo.png (image/png, 12,345 bytes)``."""
        return _label("image", self)

    @property
    def token_estimate(self) -> int:
        return IMAGE_TOKENS


@dataclass(frozen=True, slots=True)
class DocumentPart:
    """A PDF document in a user message or a tool result, by bytes or http(s) URL."""

    media_type: str
    data: bytes = field(default=b"", repr=False)
    url: str = ""
    name: str = ""

    def __post_init__(self) -> None:
        _check_media("document", self.media_type, self.data, self.url, _DOCUMENT_MAGIC)

    @property
    def label(self) -> str:
        return _label("document", self)

    @property
    def token_estimate(self) -> int:
        return DOCUMENT_PAGE_TOKENS * max(1, pdf_pages(self.data))


MediaPart: TypeAlias = ImagePart | DocumentPart


def _label(kind: str, part: ImagePart | DocumentPart) -> str:
    where = f"{len(part.data):,} bytes" if part.data else part.url[:80]
    name = f" {part.name}" if part.name else ""
    return f"{kind}{name} ({part.media_type}, {where})"


_PAGE = re.compile(rb"/Type\s*/Page(?![a-zA-Z])")


def pdf_pages(data: bytes) -> int:
    """About how many pages a PDF has (its ``/Type /Page`` objects; 0 when none is seen, as
    in a PDF whose objects are all compressed)."""
    return len(_PAGE.findall(data))


def is_media(data: bytes) -> bool:
    """Whether ``data`` starts as an image or a PDF this module takes."""
    return _sniff(data) is not None


_MAGIC = {**_IMAGE_MAGIC, **_DOCUMENT_MAGIC}


def _sniff(data: bytes) -> str | None:
    if data.startswith(b"RIFF") and data[8:12] != b"WEBP":  # WAV and AVI are RIFF too
        return None
    return next((t for t, magic in _MAGIC.items() if data.startswith(magic)), None)


def media_part(data: bytes, media_type: str = "", name: str = "") -> MediaPart:
    """An :class:`ImagePart` or :class:`DocumentPart` for ``data``, its media type taken from
    its first bytes when not given; :class:`~retinue.errors.MediaError` (one line) for
    anything else."""
    if not media_type:
        media_type = _sniff(data) or "application/octet-stream"
    if media_type in _DOCUMENT_MAGIC:
        return DocumentPart(media_type, data, name=name)
    if media_type in _IMAGE_MAGIC:
        return ImagePart(media_type, data, name=name)
    raise MediaError(
        f"unsupported media type {media_type!r}: images (PNG, JPEG, GIF, WebP) and PDF only"
    )


Content: TypeAlias = "str | Sequence[str | bytes | PathLike[str] | MediaPart]"
"""What a user may send: text, or a list of text, images and PDFs (parts, raw bytes whose
type is read from their first bytes, or paths of files to read)."""


def user_content(content: Content) -> tuple[str, tuple[MediaPart, ...]]:
    """``(text, parts)`` of ``content``: its strings joined by blank lines, its media in
    order. ``MediaError`` (one line) for a file too large or of another type; a path is the
    caller's own (read as given, its size checked before reading)."""
    if isinstance(content, str):
        return content, ()
    texts: list[str] = []
    parts: list[MediaPart] = []
    for item in content:
        if isinstance(item, str):
            texts.append(item)
        elif isinstance(item, ImagePart | DocumentPart):
            parts.append(item)
        elif isinstance(item, bytes):
            parts.append(media_part(item))
        elif isinstance(item, PathLike):
            parts.append(_read_media(Path(item)))
        else:
            raise MediaError(
                f"a message part must be text, bytes, a path or an image or document part, "
                f"not {type(item).__name__}"
            )
    return "\n\n".join(texts), tuple(parts)


def _read_media(path: Path) -> MediaPart:
    try:
        size = path.stat().st_size
        if size > MAX_MEDIA_BYTES:
            raise MediaError(
                f"{path.name}: too large ({size:,} bytes, at most {MAX_MEDIA_BYTES:,})"
            )
        data = path.read_bytes()
    except OSError as exc:  # missing, a folder, unreadable: one line, as for a bad file
        raise MediaError(f"cannot read {path}: {exc.strerror or exc}") from None
    return media_part(data, name=path.name)


def _part_to_dict(part: MediaPart) -> dict[str, Any]:
    out: dict[str, Any] = {
        "type": "image" if isinstance(part, ImagePart) else "document",
        "media_type": part.media_type,
    }
    if part.data:
        out["data"] = base64.b64encode(part.data).decode("ascii")
    else:
        out["url"] = part.url
    if part.name:
        out["name"] = part.name
    return out


def _part_from_dict(data: dict[str, Any]) -> MediaPart:
    encoded = str(data.get("data") or "")
    if len(encoded) > MAX_MEDIA_BYTES * 4 // 3 + 4:
        raise MediaError(f"media part too large: {len(encoded):,} base64 characters")
    try:
        raw = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise MediaError(f"media part: bad base64 ({exc})") from None
    cls = DocumentPart if data.get("type") == "document" else ImagePart
    return cls(
        str(data.get("media_type", "")),
        raw,
        str(data.get("url") or ""),
        str(data.get("name") or ""),
    )


def _parts_from(data: dict[str, Any]) -> tuple[MediaPart, ...]:
    return tuple(_part_from_dict(p) for p in data.get("parts") or ())


@dataclass(frozen=True, slots=True)
class SystemMessage:
    content: str
    role: Literal["system"] = field(default="system", init=False, repr=False)


@dataclass(frozen=True, slots=True)
class UserMessage:
    """What the user said: its text, then any images or documents (``parts``) after it."""

    content: str
    parts: tuple[MediaPart, ...] = ()
    role: Literal["user"] = field(default="user", init=False, repr=False)


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    """A model's reply. ``reasoning`` holds the opaque reasoning parts the provider sent, in
    its order; when the message is replayed they precede its text and tool calls."""

    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    reasoning: tuple[ReasoningPart, ...] = ()
    role: Literal["assistant"] = field(default="assistant", init=False, repr=False)


@dataclass(frozen=True, slots=True)
class ToolResultMessage:
    tool_call_id: str
    name: str
    content: str
    is_error: bool = False
    parts: tuple[MediaPart, ...] = ()
    """Images or documents the tool returned, after its text ``content``."""
    role: Literal["tool"] = field(default="tool", init=False, repr=False)


Message: TypeAlias = SystemMessage | UserMessage | AssistantMessage | ToolResultMessage


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts as the provider reported them."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    requests: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.requests + other.requests,
        )

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


def to_dict(message: Message) -> dict[str, Any]:
    """The stable JSON-ready form of one message."""
    out: dict[str, Any]
    match message:
        case SystemMessage(content=c):
            return {"role": message.role, "content": c}
        case UserMessage(content=c, parts=media):
            out = {"role": "user", "content": c}
            if media:
                out["parts"] = [_part_to_dict(p) for p in media]
            return out
        case AssistantMessage(content=c, tool_calls=calls, reasoning=parts):
            out = {"role": "assistant", "content": c}
            if calls:
                out["tool_calls"] = [
                    {"id": t.id, "name": t.name, "arguments": t.arguments} for t in calls
                ]
            if parts:
                out["reasoning"] = [p.to_dict() for p in parts]
            return out
        case ToolResultMessage():
            out = {
                "role": "tool",
                "tool_call_id": message.tool_call_id,
                "name": message.name,
                "content": message.content,
            }
            if message.is_error:
                out["is_error"] = True
            if message.parts:
                out["parts"] = [_part_to_dict(p) for p in message.parts]
            return out


def shown_dict(message: Message) -> dict[str, Any]:
    """:func:`to_dict` for people and other programs (the HTTP API, exports to clients): a
    reasoning part keeps its provider, model, kind and readable text, never its opaque payload
    (signatures, encrypted content), which only the model that made it may read back."""
    out = to_dict(message)
    if "reasoning" in out:
        out["reasoning"] = [{k: v for k, v in p.items() if k != "data"} for p in out["reasoning"]]
    return out


def from_dict(data: dict[str, Any]) -> Message:
    """Inverse of :func:`to_dict`; raises ``ValueError`` on an unknown role."""
    role = data.get("role")
    if role == "system":
        return SystemMessage(str(data["content"]))
    if role == "user":
        return UserMessage(str(data["content"]), _parts_from(data))
    if role == "assistant":
        calls = tuple(
            ToolCall(str(t["id"]), str(t["name"]), str(t.get("arguments", "{}")))
            for t in data.get("tool_calls") or ()
        )
        parts = tuple(ReasoningPart.from_dict(p) for p in data.get("reasoning") or ())
        return AssistantMessage(str(data.get("content") or ""), calls, parts)
    if role == "tool":
        return ToolResultMessage(
            str(data["tool_call_id"]),
            str(data.get("name", "")),
            str(data["content"]),
            bool(data.get("is_error", False)),
            _parts_from(data),
        )
    raise ValueError(f"unknown message role: {role!r}")


def dumps_conversation(messages: Iterable[Message]) -> str:
    """Serialise a conversation to stable JSON (a list of message objects)."""
    return json.dumps([to_dict(m) for m in messages], ensure_ascii=False)


def loads_conversation(text: str) -> list[Message]:
    return [from_dict(d) for d in json.loads(text)]


def message_text_size(messages: Sequence[Message]) -> int:
    """UTF-8 bytes of the text a conversation carries (contents, tool names and arguments,
    reasoning text and its opaque payloads, which are sent back too); an image or document
    counts as the text of its token estimate (four bytes a token), not its own bytes."""
    total = 0
    for m in messages:
        total += len(m.content.encode())
        if isinstance(m, UserMessage | ToolResultMessage):
            total += sum(4 * p.token_estimate for p in m.parts)
        if isinstance(m, AssistantMessage):
            for t in m.tool_calls:
                total += len(t.id) + len(t.name) + len(t.arguments.encode())
            for p in m.reasoning:
                total += len(p.text.encode()) + len(json.dumps(p.data).encode())
        elif isinstance(m, ToolResultMessage):
            total += len(m.tool_call_id) + len(m.name)
    return total


def history_problems(messages: Sequence[Message]) -> list[str]:
    """Why ``messages`` is not a history the next turn can be sent with (empty when it is).

    A valid history: at most one system message, first; a user message is answered by the
    assistant before the next user message; every tool call gets exactly one result right
    after the assistant message that asked for it; and it ends with an assistant reply
    without tool calls (a turn that is over, however it ended).
    """
    problems: list[str] = []
    pending: dict[str, str] = {}  # tool call id -> name, awaiting its result
    expect_reply = False
    for i, m in enumerate(messages):
        if isinstance(m, ToolResultMessage):
            if pending.pop(m.tool_call_id, None) is None:
                problems.append(f"#{i}: result for unknown or answered call {m.tool_call_id!r}")
            continue
        if pending:
            problems.append(f"#{i}: tool call(s) {sorted(pending)} left without a result")
            pending.clear()
        if isinstance(m, SystemMessage):
            if i:
                problems.append(f"#{i}: system message after the start")
        elif isinstance(m, UserMessage):
            if expect_reply:
                problems.append(f"#{i}: user message before the previous one was answered")
            expect_reply = True
        else:
            expect_reply = False
            pending = {c.id: c.name for c in m.tool_calls}
    if pending:
        problems.append(f"end: tool call(s) {sorted(pending)} left without a result")
    last = messages[-1] if messages else None
    if isinstance(last, UserMessage | ToolResultMessage):
        problems.append("end: the last turn was never answered")
    return problems
