"""Retinue messages -> Anthropic Messages API request bodies, as plain functions (no I/O).

* system messages go to the ``system`` field (text blocks);
* assistant tool calls become ``tool_use`` blocks, tool results ``tool_result`` blocks in a
  user message (``is_error`` kept); consecutive messages of one role are merged, so the
  results of parallel tool calls travel in one user message;
* the prompt prefix is marked for prompt caching: ``cache_control`` on the last system block
  and on the last block of the last message. Our sessions keep a byte-stable prefix, so each
  turn reads the previous turn's cache.

The answer's content blocks come back through :func:`reply_from_anthropic`, which checks
their shape: a malformed answer is a one-line ``ModelError``, never a traceback.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from retinue.errors import ModelError
from retinue.llm.base import ToolSpec
from retinue.messages import AssistantMessage, Message, SystemMessage, ToolCall, ToolResultMessage

__all__ = ["CACHE", "build_request", "reply_from_anthropic", "tool_input"]

CACHE = {"type": "ephemeral"}


def tool_input(arguments: str) -> dict[str, Any]:
    """A tool call's raw JSON arguments as the object Anthropic requires."""
    try:
        value = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        return {"_raw_arguments": arguments}
    return value if isinstance(value, dict) else {"_value": value}


def _field(block: Any, name: str) -> Any:
    return block.get(name) if isinstance(block, dict) else getattr(block, name, None)


def _bad(what: str, value: Any) -> ModelError:
    return ModelError(f"anthropic: malformed answer: {what}, got {type(value).__name__}")


def reply_from_anthropic(content: Any) -> AssistantMessage:
    """An answer's content blocks (SDK objects or dicts) as an assistant message.

    Text blocks are joined, ``tool_use`` blocks become tool calls, other kinds (thinking,
    ...) are skipped; a wrong shape is a one-line ``ModelError``.
    """
    if not isinstance(content, list):
        raise _bad("content must be a list of blocks", content)
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in content:
        kind = _field(block, "type")
        if kind == "text":
            text = _field(block, "text")
            if not isinstance(text, str):
                raise _bad("a text block's text must be a string", text)
            texts.append(text)
        elif kind == "tool_use":
            name, call_id, args = _field(block, "name"), _field(block, "id"), _field(block, "input")
            if not isinstance(name, str) or not name:
                raise _bad("a tool_use block's name must be a non-empty string", name)
            if not isinstance(call_id, str):
                raise _bad(f"the id of tool call {name[:60]!r} must be a string", call_id)
            if not isinstance(args, dict):
                raise _bad(f"the input of tool call {name[:60]!r} must be an object", args)
            calls.append(ToolCall(call_id, name, json.dumps(args)))
    return AssistantMessage("".join(texts), tuple(calls))


def _blocks(m: Message) -> list[dict[str, Any]]:
    if isinstance(m, ToolResultMessage):
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": m.tool_call_id,
            "content": m.content,
        }
        if m.is_error:
            block["is_error"] = True
        return [block]
    out: list[dict[str, Any]] = [{"type": "text", "text": m.content}] if m.content else []
    if isinstance(m, AssistantMessage):
        out += [
            {"type": "tool_use", "id": t.id, "name": t.name, "input": tool_input(t.arguments)}
            for t in m.tool_calls
        ]
    return out


def messages_to_anthropic(
    messages: Sequence[Message],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(system_blocks, messages)`` in Messages API form, cache breakpoints included."""
    system: list[dict[str, Any]] = []
    wire: list[dict[str, Any]] = []
    for m in messages:
        if isinstance(m, SystemMessage):
            if m.content:
                system.append({"type": "text", "text": m.content})
            continue
        role = "assistant" if isinstance(m, AssistantMessage) else "user"
        blocks = _blocks(m)
        if not blocks:
            continue  # Anthropic refuses empty text; an empty reply carries nothing
        if wire and wire[-1]["role"] == role:
            wire[-1]["content"].extend(blocks)
        else:
            wire.append({"role": role, "content": blocks})
    if system:
        system[-1] = {**system[-1], "cache_control": CACHE}
    if wire:
        last = wire[-1]["content"]
        last[-1] = {**last[-1], "cache_control": CACHE}
    return system, wire


def tools_to_anthropic(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools
    ]


def build_request(
    model: str,
    messages: Sequence[Message],
    tools: Sequence[ToolSpec],
    *,
    max_tokens: int,
    stream: bool,
) -> dict[str, Any]:
    """The JSON body of one Messages API request."""
    system, wire = messages_to_anthropic(messages)
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "messages": wire}
    if system:
        body["system"] = system
    if tools:
        body["tools"] = tools_to_anthropic(tools)
    if stream:
        body["stream"] = True
    return body
