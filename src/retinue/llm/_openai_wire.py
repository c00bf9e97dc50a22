"""Retinue messages <-> OpenAI Chat Completions wire dicts, as plain functions (no I/O).

The conversion is direct (one small dict per message, no validation pass), so building a
request costs the same per message at any history length; JSON serialisation is the only
other work. The reverse direction (:func:`messages_from_openai`) serves the loopback test
server.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from retinue.errors import ModelError
from retinue.llm._media import chat_media, chat_part, has_media, without_media
from retinue.llm.base import ToolSpec
from retinue.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

__all__ = [
    "ToolCallAssembler",
    "WireEncoder",
    "media_ready",
    "messages_from_openai",
    "messages_to_openai",
    "reply_from_openai",
    "tools_from_openai",
    "tools_to_openai",
]


def message_to_openai(m: Message) -> dict[str, Any]:
    """One message in Chat Completions form."""
    if isinstance(m, AssistantMessage):
        if not m.tool_calls:
            return {"role": "assistant", "content": m.content}
        return {
            "role": "assistant",
            "content": m.content or None,
            "tool_calls": [
                {
                    "id": t.id,
                    "type": "function",
                    "function": {"name": t.name, "arguments": t.arguments},
                }
                for t in m.tool_calls
            ],
        }
    if isinstance(m, ToolResultMessage):
        return {"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content}
    if isinstance(m, UserMessage) and m.parts:
        text = [{"type": "text", "text": m.content}] if m.content else []
        return {"role": "user", "content": text + [chat_part(p) for p in m.parts]}
    return {"role": m.role, "content": m.content}


def messages_to_openai(messages: Sequence[Message], model: str = "") -> list[dict[str, Any]]:
    """A conversation in Chat Completions form (:func:`media_ready` for ``model`` first)."""
    return [message_to_openai(m) for m in media_ready(messages, model)]


def media_ready(messages: Sequence[Message], model: str) -> Sequence[Message]:
    """``messages`` as Chat Completions can take their media: notes instead of parts for a
    model without vision; a tool result's images (a tool message holds text only) in a user
    message after the step's results. The same sequence when there is no media."""
    if not has_media(messages):
        return messages
    out: list[Message] = []
    held: list[UserMessage] = []
    for m in without_media(messages, model):
        if held and not isinstance(m, ToolResultMessage):
            out += held
            held = []
        if isinstance(m, ToolResultMessage) and m.parts:
            out.append(ToolResultMessage(m.tool_call_id, m.name, m.content, m.is_error))
            held.append(UserMessage(f"[attached by the {m.name} tool ({m.tool_call_id})]", m.parts))
            continue
        out.append(m)
    return out + held


def tools_to_openai(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [_tool_to_openai(t) for t in tools]


_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, check_circular=False).encode
_string: Callable[[str], str] = json.encoder.encode_basestring  # a JSON string, as ``_encode``'s


def _message_json(m: Message) -> str:
    """``_encode(message_to_openai(m))``, the same text, written directly for the messages of
    every turn (a tool result, an assistant's tool calls)."""
    if type(m) is ToolResultMessage and not m.parts:
        return (
            f'{{"role":"tool","tool_call_id":{_string(m.tool_call_id)},'
            f'"content":{_string(m.content)}}}'
        )
    if type(m) is AssistantMessage and m.tool_calls:
        content = _string(m.content) if m.content else "null"
        calls = ",".join(
            f'{{"id":{_string(t.id)},"type":"function","function":{{"name":{_string(t.name)},'
            f'"arguments":{_string(t.arguments)}}}}}'
            for t in m.tool_calls
        )
        return f'{{"role":"assistant","content":{content},"tool_calls":[{calls}]}}'
    return _encode(message_to_openai(m))


class WireEncoder:
    """Request bodies as JSON bytes, each message encoded once and its bytes reused.

    A conversation's messages are immutable and each request repeats the previous one's, so
    a message's encoded form is kept and a body is the join of the kept parts: building a
    request costs the new messages plus a copy, not a fresh encoding of the whole history.
    Messages are kept by value (they are frozen records: equal messages have the same JSON),
    so a history built again -- reloaded, or a sub-agent's system prompt on each delegation
    -- is not encoded again either; the cache is bounded (``max_bytes``, two generations:
    the older is dropped when the newer fills up). The last body's messages are kept joined
    too: when the next request starts with the same messages, only its new ones are looked
    up. Tool specs (whose schema is a dict) are kept by identity.
    """

    __slots__ = ("_head", "_last", "_max", "_new", "_new_bytes", "_old", "_specs", "_tools")

    def __init__(self, max_bytes: int = 8 * 2**20) -> None:
        self._max = max_bytes
        self._new: dict[Message, bytes] = {}
        self._old: dict[Message, bytes] = {}
        self._new_bytes = 0
        # the last body's messages, and their JSON joined (extended in place by the next
        # body when that one starts with them: a turn copies its new messages, not the rest)
        self._last: tuple[list[Message], bytearray] = ([], bytearray())
        self._head = ("", b"")  # the last model name, and the body's start with it
        self._tools: tuple[tuple[ToolSpec, ...], bytes] = ((), b"]")  # the last tools' part
        self._specs: dict[int, tuple[ToolSpec, bytes]] = {}

    def body(
        self,
        model: str,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        extra: dict[str, Any] | None = None,
    ) -> bytes:
        """The JSON of ``{"model", "messages", "tools"?, **extra}`` (as :func:`json.dumps`
        of the same dict would decode)."""
        return b"".join(self.parts(model, messages, tools, extra))

    def parts(
        self,
        model: str,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        extra: dict[str, Any] | None = None,
    ) -> list[bytes | bytearray]:
        """:meth:`body` in pieces, for a caller that joins them with more (the HTTP request's
        head): one copy of a long history instead of two. Join them before the next call:
        the messages' piece is this encoder's own buffer, which the next call extends."""
        name, head = self._head
        if name != model or not head:
            head = b'{"model":%s,"messages":[' % _utf8(_encode(model))
            self._head = (model, head)
        parts: list[bytes | bytearray] = [head, self._messages(messages), self._tools_part(tools)]
        for key, value in (extra or {}).items():
            parts.append(b"," + _utf8(_encode(key)) + b":" + _utf8(_encode(value)))
        parts.append(b"}")
        return parts

    def _tools_part(self, tools: Sequence[ToolSpec]) -> bytes:
        """``]`` closing the messages, then the tools (the last ones' bytes when the very
        same specs come again, as on every turn)."""
        before, part = self._tools
        if len(before) != len(tools) or not all(map(operator.is_, before, tools)):
            part = b"]"
            if tools:
                part = b'],"tools":[%s]' % b",".join([self._spec(t) for t in tools])
            self._tools = (tuple(tools), part)
        return part

    def _spec(self, spec: ToolSpec) -> bytes:
        hit = self._specs.get(id(spec))
        if hit is not None and hit[0] is spec:
            return hit[1]
        data = _utf8(_encode(_tool_to_openai(spec)))
        if len(self._specs) >= MAX_KEPT_SPECS:
            self._specs.clear()
        self._specs[id(spec)] = (spec, data)  # (held, so that its id is not reused)
        return data

    def _messages(self, messages: Sequence[Message]) -> bytearray:
        """The messages joined, from the last body's when it is this one's beginning."""
        messages = _as_list(messages)
        before, joined = self._last  # (both this encoder's own)
        # until this body is done: a failure must not leave it half-kept
        self._last = ([], bytearray())
        n = len(before)
        if n and len(messages) >= n:
            # Extended by the new messages only and compared as a whole: a list comparison
            # takes an identical element as equal by its address alone, so a long history
            # costs neither a copy nor a touch of each message (cold in memory by now).
            tail = messages[n:]
            before.extend(tail)
            if before == messages:
                if tail:
                    joined += b"," + b",".join(self._parts(tail))
                if len(joined) <= self._max:
                    self._last = (before, joined)
                return joined
        joined = bytearray(b",").join(self._parts(messages))
        if len(joined) <= self._max:
            self._last = (list(messages), joined)
        return joined

    def _parts(self, messages: Sequence[Message]) -> list[bytes]:
        new, old = self._new, self._old
        try:  # the common case in one pass: every message but the newest few is kept
            kept = [new.get(m) or old.get(m) or b"" for m in messages]
        except TypeError:  # a field that is not hashable (not a Message as typed): not kept
            return [_utf8(_message_json(m)) for m in messages]
        for i, part in enumerate(kept):
            if not part:
                kept[i] = self._encode(messages[i])
        return kept

    def _encode(self, message: Message) -> bytes:
        data = _utf8(_message_json(message))
        if self._new_bytes + len(data) > self._max:
            self._old, self._new, self._new_bytes = self._new, {}, 0
        self._new[message] = data
        self._new_bytes += len(data)
        return data


MAX_KEPT_SPECS = 1024  # tool specs' encoded forms kept (all dropped when full)


def _utf8(text: str) -> bytes:
    """``text`` as UTF-8; a lone surrogate (a file name that is not UTF-8, as the file tools
    show it) becomes ``?`` instead of failing the request."""
    return text.encode("utf-8", "replace")


def _as_list(items: Sequence[Message]) -> list[Message]:
    return items if isinstance(items, list) else list(items)


def _tool_to_openai(t: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
    }


def _text(content: Any) -> str:
    """Message content as text: a string, or the text parts of a content-part list."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(p.get("text", "")) for p in content if isinstance(p, dict) and "text" in p
        )
    return str(content)


def _bad(what: str, value: Any) -> ModelError:
    return ModelError(f"openai: malformed answer: {what}, got {type(value).__name__}")


def _reply_call(tc: Any) -> ToolCall:
    if not isinstance(tc, dict):
        raise _bad("a tool call must be an object", tc)
    fn = tc.get("function")
    if not isinstance(fn, dict):
        raise _bad("a tool call's function must be an object", fn)
    name, arguments, call_id = fn.get("name"), fn.get("arguments"), tc.get("id")
    if not isinstance(name, str) or not name:
        raise _bad("a tool call's name must be a non-empty string", name)
    if arguments is not None and not isinstance(arguments, str):
        raise _bad(f"the arguments of tool call {name[:60]!r} must be a JSON string", arguments)
    if call_id is not None and not isinstance(call_id, str):
        raise _bad(f"the id of tool call {name[:60]!r} must be a string", call_id)
    return ToolCall(call_id or "", name, arguments or "{}")


def reply_from_openai(message: Any) -> AssistantMessage:
    """A completion's ``message`` object as an assistant message; ``ModelError`` (one line)
    when its shape is wrong. A content-part list is joined as text."""
    if message is None:
        message = {}
    if not isinstance(message, dict):
        raise _bad("the message must be an object", message)
    content, tool_calls = message.get("content"), message.get("tool_calls")
    if content is not None and not isinstance(content, str | list):
        raise _bad("the message content must be a string or a list of parts", content)
    if tool_calls is not None and not isinstance(tool_calls, list):
        raise _bad("tool_calls must be a list", tool_calls)
    calls = tuple([_reply_call(tc) for tc in tool_calls]) if tool_calls else ()
    return AssistantMessage(_text(content), calls)


def messages_from_openai(wire: Sequence[dict[str, Any]]) -> list[Message]:
    """Chat Completions messages back into Retinue messages; ``ValueError`` on a bad role."""
    out: list[Message] = []
    names: dict[str, str] = {}
    for d in wire:
        role = d.get("role")
        if role in ("system", "developer"):
            out.append(SystemMessage(_text(d.get("content"))))
        elif role == "user":
            content = d.get("content")
            media = [chat_media(p) for p in content] if isinstance(content, list) else []
            out.append(UserMessage(_text(content), tuple(p for p in media if p is not None)))
        elif role == "assistant":
            calls = []
            for t in d.get("tool_calls") or ():
                fn = t.get("function") or {}
                call_id, name = str(t.get("id", "")), str(fn.get("name", ""))
                calls.append(ToolCall(call_id, name, str(fn.get("arguments") or "{}")))
                names[call_id] = name
            out.append(AssistantMessage(_text(d.get("content")), tuple(calls)))
        elif role == "tool":
            content = d.get("content")
            if isinstance(content, list) and any(p.get("type") != "text" for p in content):
                raise ValueError("a tool message's content parts must be text")
            call_id = str(d.get("tool_call_id", ""))
            out.append(ToolResultMessage(call_id, names.get(call_id, ""), _text(d.get("content"))))
        else:
            raise ValueError(f"unknown message role: {role!r}")
    return out


def tools_from_openai(wire: Sequence[dict[str, Any]]) -> list[ToolSpec]:
    specs = []
    for t in wire:
        fn = t.get("function") or {}
        params = fn.get("parameters") or {"type": "object"}
        specs.append(ToolSpec(str(fn.get("name", "")), str(fn.get("description") or ""), params))
    return specs


@dataclass(slots=True)
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass(slots=True)
class ToolCallAssembler:
    """Collects streamed tool-call deltas (keyed by ``index``) into whole tool calls."""

    _calls: dict[int, _PartialCall] = field(default_factory=dict)

    def add(self, index: int, id: str | None, name: str | None, arguments: str | None) -> None:
        part = self._calls.setdefault(index, _PartialCall())
        if id:
            part.id = id
        if name:
            part.name += name
        if arguments:
            part.arguments.append(arguments)

    def calls(self) -> tuple[ToolCall, ...]:
        return tuple(
            ToolCall(p.id or f"call_{i}", p.name, "".join(p.arguments) or "{}")
            for i, p in sorted(self._calls.items())
        )
