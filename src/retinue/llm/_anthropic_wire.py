"""Retinue messages -> Anthropic Messages API request bodies, as plain functions (no I/O).

* system messages go to the ``system`` field (text blocks);
* assistant tool calls become ``tool_use`` blocks, tool results ``tool_result`` blocks in a
  user message (``is_error`` kept); consecutive messages of one role are merged, so the
  results of parallel tool calls travel in one user message;
* the prompt prefix is marked for prompt caching: ``cache_control`` on the last system block,
  on the last block of the last message and on the last block of the assistant message before
  it. Our sessions keep a byte-stable prefix, so each turn reads the previous turn's cache;
  the API looks for it only "up to approximately 20 blocks before your explicit breakpoint"
  (https://platform.claude.com/docs/en/build-with-claude/prompt-caching), and a step of ten
  parallel tool calls adds twenty blocks (calls and results), so the breakpoint on the reply
  keeps the previous request's prefix within reach (3 of the 4 breakpoints a request may
  have);
* ``thinking`` and ``redacted_thinking`` blocks are kept as
  :class:`~retinue.messages.ReasoningPart` (the readable thinking in ``text``, every other
  field of the block, the ``signature`` or ``data``, in ``data``) and sent back verbatim,
  first in their assistant message, to the model that made them and no other
  (:func:`readable_by`);
* models that always think (Claude Fable and Mythos 5.x) and those with adaptive thinking
  (Opus and Sonnet 4.6 and later, the Claude 5 family) are sent ``thinking: {"type":
  "adaptive"}`` (:func:`thinking_config`), never ``disabled`` or a manual budget. Retinue
  never prefills an answer nor forces a tool choice.

The answer's content blocks come back through :func:`reply_from_anthropic`, which checks
their shape: a malformed answer is a one-line ``ModelError``, never a traceback.

Sources: extended thinking, "Preserving thinking blocks" and "Thinking with tool use"
(https://platform.claude.com/docs/en/build-with-claude/extended-thinking), the two-turn
walk-through (https://platform.claude.com/docs/en/build-with-claude/thinking-tool-workflows),
adaptive thinking (https://platform.claude.com/docs/en/build-with-claude/adaptive-thinking),
the Fable 5 / 5.1 migration guides
(https://platform.claude.com/docs/en/models/fable-5-1/migration-guide) and what is new in
Fable 5.2 (https://platform.claude.com/docs/en/models/fable-5-2/whats-new-fable-5-2).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from retinue.errors import ModelError
from retinue.llm._media import anthropic_block, without_media
from retinue.llm.base import ToolSpec
from retinue.llm.profiles import ADAPTIVE, ALWAYS, profile_for
from retinue.llm.settings import ModelSettings
from retinue.messages import (
    AssistantMessage,
    Message,
    ReasoningPart,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

__all__ = [
    "CACHE",
    "always_thinks",
    "build_request",
    "dropped_settings",
    "is_signed",
    "readable_by",
    "reasoning_block",
    "reasoning_part",
    "reply_from_anthropic",
    "thinking_config",
    "tool_input",
]

CACHE = {"type": "ephemeral"}
PROVIDER = "anthropic"
THINKING_KINDS = ("thinking", "redacted_thinking")

# Which models think, and how, is the model catalogue's (retinue.llm.profiles): Claude Fable
# and Mythos 5.x and Opus 5.5 think on every request ("thinking: {type: 'disabled'} and manual
# extended thinking ... return a 400 error", Fable 5.1 migration guide, baseline; "Adaptive
# (always on)", Opus 5.5 overview); adaptive thinking arrived with Opus 4.6 and Sonnet 4.6,
# and the Claude 5 family takes only the adaptive form (adaptive-thinking page, "supported
# models"). Older models get no thinking field.
_DATE = re.compile(r"-\d{8}$")


def always_thinks(model: str) -> bool:
    """Whether ``model`` thinks on every request (no way to turn it off)."""
    return profile_for(f"{PROVIDER}:{model}").thinking == ALWAYS


def _adaptive(model: str) -> bool:
    return profile_for(f"{PROVIDER}:{model}").thinking in (ADAPTIVE, ALWAYS)


def thinking_config(model: str) -> dict[str, Any] | None:
    """The ``thinking`` field for ``model``: adaptive where the model has it, else none.

    Never ``disabled`` nor ``enabled`` with ``budget_tokens``: both are a 400 on the models
    that always think, and the budget form is deprecated on Opus/Sonnet 4.6.
    """
    return {"type": "adaptive"} if _adaptive(model) else None


def _bare(model: str) -> str:
    return _DATE.sub("", model.strip().lower())


def readable_by(part: ReasoningPart, model: str) -> bool:
    """Whether ``part`` may be sent to ``model``: only Anthropic blocks the same model made.

    Thinking blocks are readable one way only ("Claude Fable 5.1 can read thinking blocks
    from ... earlier Claude models. None of those models can read Claude Fable 5.1's thinking
    blocks", Fable 5.1 migration guide; "Only Claude Fable 5.2 and Claude Mythos 5.2 read
    Claude Fable 5.2 thinking blocks", what's new in Fable 5.2). Which older blocks a newer
    model reads changes with each release, so a block goes back only to the model that made
    it (a dated id and its alias count as one); blocks of another model or provider are
    dropped, which the API allows for earlier turns ("you can omit thinking blocks from
    previous turns", extended thinking, "Preserving thinking blocks").
    """
    return (
        part.provider == PROVIDER
        and part.kind in THINKING_KINDS
        and _bare(part.model) == _bare(model)
    )


def reasoning_part(block: dict[str, Any], model: str) -> ReasoningPart:
    """A ``thinking`` / ``redacted_thinking`` block (as a dict) as a reasoning part."""
    kind = str(block.get("type"))
    text = block.get("thinking") if kind == "thinking" else ""
    if not isinstance(text, str):
        raise _bad("a thinking block's thinking must be a string", text)
    data = {k: v for k, v in block.items() if k not in ("type", "thinking")}
    return ReasoningPart(PROVIDER, model, kind, data, text)


def is_signed(part: ReasoningPart) -> bool:
    """A block the API can check: a thinking block with its signature, a redacted one with
    its data. One without (a proxy that strips them) cannot be sent back; it is dropped."""
    key = "signature" if part.kind == "thinking" else "data"
    value = part.data.get(key)
    return isinstance(value, str) and bool(value)


def reasoning_block(part: ReasoningPart) -> dict[str, Any]:
    """The block ``part`` came from, as Anthropic sent it (a stored part cannot change its
    own ``type`` or ``thinking`` through ``data``)."""
    rest = {k: v for k, v in part.data.items() if k not in ("type", "thinking")}
    if part.kind == "thinking":
        return {"type": "thinking", "thinking": part.text, **rest}
    return {"type": part.kind, **rest}


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


def _as_dict(block: Any) -> dict[str, Any]:
    if isinstance(block, dict):
        return block
    dump = getattr(block, "model_dump", None)
    if dump is None:
        raise _bad("a content block must be an object", block)
    return dump(mode="json", exclude_none=True)


def reply_from_anthropic(content: Any, model: str = "") -> AssistantMessage:
    """An answer's content blocks (SDK objects or dicts) as an assistant message.

    Text blocks are joined, ``tool_use`` blocks become tool calls, ``thinking`` and
    ``redacted_thinking`` blocks become reasoning parts of ``model`` (the model that
    answered), in order; other kinds are skipped; a wrong shape is a one-line ``ModelError``.
    """
    if not isinstance(content, list):
        raise _bad("content must be a list of blocks", content)
    texts: list[str] = []
    calls: list[ToolCall] = []
    parts: list[ReasoningPart] = []
    for block in content:
        kind = _field(block, "type")
        if kind in THINKING_KINDS:
            part = reasoning_part(_as_dict(block), model)
            if is_signed(part):
                parts.append(part)
        elif kind == "text":
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
    return AssistantMessage("".join(texts), tuple(calls), tuple(parts))


def _blocks(m: Message, model: str) -> list[dict[str, Any]]:
    if isinstance(m, ToolResultMessage):
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": m.tool_call_id,
            "content": m.content,
        }
        if m.parts:  # "content": text, image and document blocks (the tool-use docs)
            text = [{"type": "text", "text": m.content}] if m.content else []
            block["content"] = text + [anthropic_block(p) for p in m.parts]
        if m.is_error:
            block["is_error"] = True
        return [block]
    out: list[dict[str, Any]] = []
    if isinstance(m, AssistantMessage) and (m.content or m.tool_calls):
        # first in the message, before text and tool_use, as they came ("the assistant turn
        # echoed exactly as received, thinking block included", thinking-tool-workflows);
        # a reply with neither text nor calls is left out whole, as before
        out += [reasoning_block(p) for p in m.reasoning if readable_by(p, model)]
    if m.content:
        out.append({"type": "text", "text": m.content})
    if isinstance(m, UserMessage):
        out += [anthropic_block(p) for p in m.parts]
    if isinstance(m, AssistantMessage):
        out += [
            {"type": "tool_use", "id": t.id, "name": t.name, "input": tool_input(t.arguments)}
            for t in m.tool_calls
        ]
    return out


def messages_to_anthropic(
    messages: Sequence[Message], model: str = "", cache: dict[str, Any] = CACHE
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(system_blocks, messages)`` in Messages API form for ``model``, cache breakpoints
    (``cache``) included; reasoning parts ``model`` cannot read are left out
    (:func:`readable_by`)."""
    system: list[dict[str, Any]] = []
    wire: list[dict[str, Any]] = []
    for m in without_media(messages, model):
        if isinstance(m, SystemMessage):
            if m.content:
                system.append({"type": "text", "text": m.content})
            continue
        role = "assistant" if isinstance(m, AssistantMessage) else "user"
        blocks = _blocks(m, model)
        if not blocks:
            continue  # Anthropic refuses empty text; an empty reply carries nothing
        if wire and wire[-1]["role"] == role:
            wire[-1]["content"].extend(blocks)
        else:
            wire.append({"role": role, "content": blocks})
    if system:
        system[-1] = {**system[-1], "cache_control": cache}
    marked = wire[-2:] if len(wire) > 1 and wire[-2]["role"] == "assistant" else wire[-1:]
    for message in marked:
        blocks = message["content"]
        index = _cacheable(blocks)
        if index is not None:
            blocks[index] = {**blocks[index], "cache_control": cache}
    return system, wire


def _cacheable(blocks: list[dict[str, Any]]) -> int | None:
    """The last block a cache breakpoint may sit on: thinking blocks cannot carry
    ``cache_control`` ("Thinking blocks cannot be explicitly marked with cache_control",
    extended thinking, "Thinking block caching")."""
    for i in range(len(blocks) - 1, -1, -1):
        if blocks[i].get("type") not in THINKING_KINDS:
            return i
    return None


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
    settings: ModelSettings | None = None,
) -> dict[str, Any]:
    """The JSON body of one Messages API request, ``settings`` mapped where ``model``
    takes them (:func:`dropped_settings` names the others, left out)."""
    s = settings or ModelSettings()
    cache = {**CACHE, "ttl": s.cache_ttl} if s.cache_ttl else CACHE
    system, wire = messages_to_anthropic(messages, model, cache)
    limit = s.max_output_tokens or max_tokens
    body: dict[str, Any] = {"model": model, "max_tokens": limit, "messages": wire}
    if system:
        body["system"] = system
    if tools:
        body["tools"] = tools_to_anthropic(tools)  # no tool_choice: "auto" is the default
    thinking = thinking_config(model)
    if thinking is not None:
        body["thinking"] = thinking
        if s.effort:
            body["output_config"] = {"effort": s.effort}
    else:
        body.update(
            (k, v) for k, v in (("temperature", s.temperature), ("top_p", s.top_p)) if v is not None
        )
    body.update((k, v) for k, v in s.extra.items() if k not in _OWN_FIELDS)
    if stream:
        body["stream"] = True
    return body


_OWN_FIELDS = frozenset({"model", "messages", "stream", "system", "tools"})


def dropped_settings(model: str, settings: ModelSettings) -> list[str]:
    """The settings :func:`build_request` leaves out for ``model``, each with the reason.

    With thinking on, ``temperature`` and ``top_p`` are not sent ("Thinking isn't compatible
    with temperature or top_k modifications", extended thinking, "Feature compatibility");
    ``effort`` needs adaptive thinking (adaptive-thinking page).
    """
    thinking = thinking_config(model) is not None
    out = []
    if thinking and settings.temperature is not None:
        out.append("temperature (not taken while the model thinks)")
    if thinking and settings.top_p is not None:
        out.append("top_p (not taken while the model thinks)")
    if not thinking and settings.effort:
        out.append("effort (the model has no adaptive thinking)")
    out += [f"extra.{k} (set by Retinue)" for k in settings.extra if k in _OWN_FIELDS]
    return out
