"""Retinue messages <-> OpenAI Responses API items, as plain functions (no I/O).

The request side (:func:`request_input`, :func:`tools_to_responses`) writes a conversation as
Responses input items; the reply side (:func:`response_from_json`) reads a Response object
(parsed JSON) back into an :class:`~retinue.messages.AssistantMessage`. The reverse direction
(:func:`messages_from_responses`) serves the loopback emulator.

Reasoning (OpenAI's reasoning guide, "Encrypted reasoning items"; the ``include`` parameter of
the Responses API reference): a request made with ``store=false`` and
``include=["reasoning.encrypted_content"]`` gets each ``reasoning`` output item with its
``encrypted_content``. The item is kept whole, as the provider's own JSON, in a
:class:`~retinue.messages.ReasoningPart` (``provider="openai"``, ``kind="reasoning"``) and sent
back unchanged, before the message text and ``function_call`` items it preceded, only to the
model that made it: OpenAI decrypts and verifies the content per model, so an item from another
model (or another provider's thinking) is left out rather than risk a 400. The part records the
model as the request named it (the name the next request compares), not the dated snapshot
the response reports. An output whose reasoning items come between its calls is replayed with
all its reasoning first (an assistant message keeps parts and calls apart); the usual output,
reasoning then message and calls, is replayed in its own order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from retinue.errors import ModelError, ModelRefusal
from retinue.llm._media import responses_media, responses_part, without_media
from retinue.llm.base import ModelResponse, ToolSpec
from retinue.messages import (
    AssistantMessage,
    MediaPart,
    Message,
    ReasoningPart,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)

__all__ = [
    "PROVIDER",
    "REASONING",
    "messages_from_responses",
    "refusal_text",
    "request_input",
    "response_from_json",
    "tools_from_responses",
    "tools_to_responses",
    "usage_from_json",
]

PROVIDER = "openai"
REASONING = "reasoning"  # the ReasoningPart kind of a Responses reasoning item


def request_input(messages: Sequence[Message], model: str) -> tuple[str | None, list[Any]]:
    """``(instructions, input)`` for a request to ``model``: the leading system message as
    ``instructions``, every other message as input items."""
    instructions: str | None = None
    items: list[Any] = []
    for i, m in enumerate(without_media(messages, model)):
        if isinstance(m, SystemMessage):
            if i == 0:
                instructions = m.content
            else:
                items.append({"role": "developer", "content": m.content})
        elif isinstance(m, UserMessage):
            items.append({"role": "user", "content": _with_media(m.content, m.parts)})
        elif isinstance(m, AssistantMessage):
            _assistant_items(m, model, items)
        else:
            output = _with_media(m.content, m.parts)
            items.append(
                {"type": "function_call_output", "call_id": m.tool_call_id, "output": output}
            )
    return instructions, items


def _with_media(text: str, parts: Sequence[MediaPart]) -> str | list[dict[str, Any]]:
    """The text alone, or (with images or files) ``input_text`` then the media parts."""
    if not parts:
        return text
    head = [{"type": "input_text", "text": text}] if text else []
    return head + [responses_part(p) for p in parts]


def _media_of(content: Any) -> tuple[MediaPart, ...]:
    if not isinstance(content, list):
        return ()
    found = [responses_media(p) for p in content]
    return tuple(p for p in found if p is not None)


def _assistant_items(m: AssistantMessage, model: str, items: list[Any]) -> None:
    """An assistant turn as the API wrote it: its reasoning items (verbatim, this model's
    only), then its text, then its function calls, which the reasoning preceded."""
    items.extend(p.data for p in m.reasoning if replayable(p, model))
    if m.content:
        items.append({"role": "assistant", "content": m.content})
    items.extend(
        {"type": "function_call", "call_id": t.id, "name": t.name, "arguments": t.arguments}
        for t in m.tool_calls
    )


def replayable(part: ReasoningPart, model: str) -> bool:
    """Whether ``part`` may be sent to ``model``: an OpenAI reasoning item that this very model
    produced. Another model's item cannot be verified by this one (its encrypted content is
    the other model's), and another provider's thinking means nothing here."""
    return part.provider == PROVIDER and part.kind == REASONING and part.model == model


def tools_to_responses(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """Function tools in the Responses API's flat shape. ``strict`` is sent as ``false``:
    strict mode requires every property listed in ``required`` and
    ``additionalProperties: false``, which tool schemas need not follow."""
    return [
        {
            "type": "function",
            "name": t.name,
            "description": t.description,
            "parameters": t.parameters,
            "strict": False,
        }
        for t in tools
    ]


def _bad(what: str, value: Any) -> ModelError:
    return ModelError(f"openai: malformed response: {what}, got {type(value).__name__}")


def response_from_json(data: Any, model: str) -> ModelResponse:
    """A Response object (parsed JSON) as a :class:`ModelResponse`; the reasoning items are
    kept for ``model``. A refusal, a failed response or a wrong shape is a
    :class:`~retinue.errors.ModelError` in one line."""
    if not isinstance(data, dict):
        raise _bad("the response must be an object", data)
    if data.get("status") == "failed":
        error = data.get("error") or {}
        detail = error.get("message") if isinstance(error, dict) else None
        raise ModelError(f"openai: the response failed: {_line(detail or 'no reason given')}")
    output = data.get("output")
    if not isinstance(output, list):
        raise _bad("output must be a list", output)
    texts: list[str] = []
    calls: list[ToolCall] = []
    reasoning: list[ReasoningPart] = []
    for item in output:
        if not isinstance(item, dict):
            raise _bad("an output item must be an object", item)
        kind = item.get("type")
        if kind == "reasoning":
            reasoning.append(_reasoning_part(item, model))
        elif kind == "message":
            texts.append(_message_text(item))
        elif kind == "function_call":
            calls.append(_call(item))
        # other item kinds (hosted tools) are not requested by Retinue: ignored
    message = AssistantMessage("".join(texts), tuple(calls), reasoning=tuple(reasoning))
    return ModelResponse(message, usage_from_json(data.get("usage")), _finish(data, calls))


def _reasoning_part(item: dict[str, Any], model: str) -> ReasoningPart:
    summary = item.get("summary") or []
    text = "\n\n".join(
        str(s.get("text", "")) for s in summary if isinstance(s, dict) and s.get("text")
    )
    return ReasoningPart(PROVIDER, model, REASONING, item, text)


def _message_text(item: dict[str, Any]) -> str:
    content = item.get("content") or []
    if not isinstance(content, list):
        raise _bad("a message's content must be a list", content)
    refusal = refusal_text(content)
    if refusal is not None:
        raise _refusal(refusal)
    return "".join(
        str(p.get("text", ""))
        for p in content
        if isinstance(p, dict) and p.get("type") == "output_text"
    )


def refusal_text(content: list[Any]) -> str | None:
    """The text of a ``refusal`` content part, if the message has one."""
    for part in content:
        if isinstance(part, dict) and part.get("type") == "refusal":
            return str(part.get("refusal") or "")
    return None


def _refusal(text: str) -> ModelRefusal:
    return ModelRefusal(
        f"openai: the model refused to answer: {_line(text) or '(no reason given)'}"
    )


def _call(item: dict[str, Any]) -> ToolCall:
    name, arguments, call_id = item.get("name"), item.get("arguments"), item.get("call_id")
    if not isinstance(name, str) or not name:
        raise _bad("a function call's name must be a non-empty string", name)
    if arguments is not None and not isinstance(arguments, str):
        raise _bad(f"the arguments of function call {name[:60]!r} must be a string", arguments)
    if not isinstance(call_id, str) or not call_id:
        raise _bad(f"the call_id of function call {name[:60]!r} must be a string", call_id)
    return ToolCall(call_id, name, arguments or "{}")


def _finish(data: dict[str, Any], calls: list[ToolCall]) -> str:
    if calls:
        return "tool_calls"
    if data.get("status") == "incomplete":
        details = data.get("incomplete_details") or {}
        reason = details.get("reason") if isinstance(details, dict) else None
        return "length" if reason == "max_output_tokens" else str(reason or "length")
    return "stop"


def usage_from_json(u: Any) -> Usage:
    """Responses usage as :class:`Usage`: input (cached part included, as Chat Completions
    counts it), output (reasoning tokens included: OpenAI bills them as output), cached."""
    if not isinstance(u, dict):
        return Usage(requests=1)
    details = u.get("input_tokens_details")
    cached = details.get("cached_tokens") or 0 if isinstance(details, dict) else 0
    return Usage(u.get("input_tokens") or 0, u.get("output_tokens") or 0, cached, 1)


def _line(text: Any) -> str:
    return " ".join(str(text).split())[:500]


# -- the reverse direction, for the loopback emulator ---------------------------------------


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(p.get("text", "")) for p in content if isinstance(p, dict) and "text" in p
        )
    return ""


def messages_from_responses(body: dict[str, Any]) -> list[Message]:
    """A Responses request body back into Retinue messages (consecutive output items make one
    assistant message); ``ValueError`` on an item it does not know."""
    model = str(body.get("model", ""))
    out: list[Message] = []
    if body.get("instructions"):
        out.append(SystemMessage(str(body["instructions"])))
    raw = body.get("input")
    items = [{"role": "user", "content": raw}] if isinstance(raw, str) else list(raw or ())
    turn: list[dict[str, Any]] = []  # output items of the assistant turn being read
    names: dict[str, str] = {}
    for item in items:
        kind = item.get("type") or "message"
        role = item.get("role")
        if kind in ("reasoning", "function_call") or (kind == "message" and role == "assistant"):
            turn.append(item)
            continue
        if turn:
            out.append(_assistant_from(turn, model, names))
            turn = []
        if kind == "function_call_output":
            call_id = str(item.get("call_id", ""))
            output = item["output"]
            text = output if isinstance(output, str) else _content_text(output)
            name = names.get(call_id, "")
            out.append(ToolResultMessage(call_id, name, text, parts=_media_of(output)))
        elif kind == "message" and role in ("system", "developer"):
            out.append(SystemMessage(_content_text(item.get("content"))))
        elif kind == "message" and role == "user":
            content = item.get("content")
            out.append(UserMessage(_content_text(content), _media_of(content)))
        else:
            raise ValueError(f"unknown input item: type {kind!r}, role {role!r}")
    if turn:
        out.append(_assistant_from(turn, model, names))
    return out


def _assistant_from(
    turn: list[dict[str, Any]], model: str, names: dict[str, str]
) -> AssistantMessage:
    text = "".join(_content_text(i.get("content")) for i in turn if i.get("type") != "reasoning")
    calls = tuple(
        ToolCall(str(i["call_id"]), str(i["name"]), str(i.get("arguments") or "{}"))
        for i in turn
        if i.get("type") == "function_call"
    )
    names.update((c.id, c.name) for c in calls)
    parts = tuple(_reasoning_part(i, model) for i in turn if i.get("type") == "reasoning")
    return AssistantMessage(text, calls, reasoning=parts)


def tools_from_responses(wire: Sequence[dict[str, Any]]) -> list[ToolSpec]:
    return [
        ToolSpec(
            str(t.get("name", "")),
            str(t.get("description") or ""),
            t.get("parameters") or {"type": "object"},
        )
        for t in wire
        if t.get("type") == "function"
    ]
