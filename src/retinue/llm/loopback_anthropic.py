"""A loopback Anthropic Messages API that enforces Claude's documented thinking rules.

:class:`LoopbackAnthropicServer` answers ``POST /v1/messages`` on 127.0.0.1 from a
:class:`~retinue.llm.testing.ScriptedModel` (``base_url`` has no ``/v1``), as the real API
would, for the official ``anthropic`` SDK and Retinue's :class:`~retinue.llm.anthropic.
AnthropicModel` alike. It plays the rules a client must keep with a thinking model, each one
written from Anthropic's documentation (cited where it is enforced):

* Claude Fable and Mythos 5.x always think; ``thinking: {"type": "disabled"}`` or a manual
  budget is a 400, so is an assistant prefill, so is a ``tool_choice`` that forces a tool;
  with thinking on, so is a ``temperature`` other than 1 or a ``top_p`` below 0.95, and an
  unknown ``output_config.effort`` always is;
* when thinking is on, every answer starts with a signed ``thinking`` block (and, with
  ``redact=True``, a ``redacted_thinking`` one);
* the assistant message of the current tool-use cycle must come back starting with its
  thinking blocks, or the answer is Anthropic's own 400 "Expected `thinking` or
  `redacted_thinking`, but found `tool_use`...";
* a thinking block must come back unchanged, to the model that made it: a changed or
  foreign signature is a 400 (stricter than the API, which lets some newer models read
  older blocks; Retinue never sends a block to another model, so the emulation checks that);
* a scripted ``ModelResponse(..., finish_reason="refusal")`` is answered as the API answers
  a declined request: HTTP 200, ``stop_reason: "refusal"``, a ``stop_details.category``;
* prompt caching: hits by prefix at the ``cache_control`` breakpoints, writes, and lifetimes
  (5 minutes, or 1 hour with ``"ttl": "1h"``) that expire (``cache.advance(seconds)`` lets
  time pass at once), reported in the answer's usage as the API reports them
  (:mod:`retinue.llm._prompt_cache`, which cites the prompt-caching page for each rule); more
  than 4 breakpoints is a 400. ``cache_uses`` lists each answered request's
  :class:`~retinue.llm._prompt_cache.CacheUse`. A scripted response whose usage names cache
  reads itself is reported as scripted.

``rejected`` lists the ``(status, message)`` of every request refused by a rule, so a test
can say "zero requests rejected"; ``requests`` holds the bodies that reached the model.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import json
import re
import secrets
import threading
from typing import Any

from retinue.llm._media import anthropic_media
from retinue.llm._prompt_cache import (
    MAX_BREAKPOINTS,
    TOO_MANY_BREAKPOINTS,
    CacheUse,
    PromptCache,
    breakpoint_count,
)
from retinue.llm.base import Model, ModelResponse, ToolSpec
from retinue.llm.loopback import LoopbackServer
from retinue.messages import (
    AssistantMessage,
    MediaPart,
    Message,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

__all__ = ["LoopbackAnthropicServer", "messages_from_anthropic"]

_STOP = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}
_THINKING = ("thinking", "redacted_thinking")
_ALWAYS = re.compile(r"claude-(fable|mythos)-([5-9]|\d\d)")
_ids = itertools.count(1)

# The API's own words for each rule (quoted from its 400 answers and the docs below).
EXPECTED_THINKING = (
    "messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
    "`{found}`. When `thinking` is enabled, a final `assistant` message must start with a "
    "thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). "
    "We recommend you include thinking blocks from previous turns. To avoid this "
    "requirement, disable `thinking`. Please consult our documentation at "
    "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"
)
INVALID_SIGNATURE = "messages.{i}.content.{j}: Invalid `signature` in `thinking` block"
INVALID_REDACTED = "messages.{i}.content.{j}: Invalid `data` in `redacted_thinking` block"
THINKING_TYPE = (
    "`thinking.type.{kind}` is not supported for this model. Use `thinking.type.adaptive` "
    "and `output_config.effort` to control thinking behavior."
)
PREFILL = (
    "This model does not support assistant message prefill. The conversation must end "
    "with a user message."
)
FORCED_TOOL = "Thinking may not be enabled when `tool_choice` forces tool use."
SAMPLING = (
    "`temperature` may only be set to 1 when thinking is enabled, and `top_p` to a value "
    "between 0.95 and 1."
)
EFFORT = "output_config.effort: Input should be 'low', 'medium', 'high', 'xhigh' or 'max'"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or () if b.get("type") == "text")


def messages_from_anthropic(body: dict[str, Any]) -> list[Message]:
    """A Messages API request body back into Retinue messages (thinking blocks left out:
    the scripted model answers from the text and the tool calls)."""
    out: list[Message] = []
    if body.get("system"):
        out.append(SystemMessage(_text(body["system"])))
    names: dict[str, str] = {}
    for m in body["messages"]:
        blocks = m["content"]
        if isinstance(blocks, str):
            blocks = [{"type": "text", "text": blocks}]
        if m["role"] == "assistant":
            calls = tuple(
                ToolCall(b["id"], b["name"], json.dumps(b["input"]))
                for b in blocks
                if b["type"] == "tool_use"
            )
            names.update((c.id, c.name) for c in calls)
            out.append(AssistantMessage(_text(blocks), calls))
            continue
        for b in blocks:
            if b["type"] == "tool_result":
                tid = b["tool_use_id"]
                content = b.get("content", "")
                media = _media(content) if isinstance(content, list) else ()
                error = bool(b.get("is_error"))
                out.append(ToolResultMessage(tid, names.get(tid, ""), _text(content), error, media))
            elif b["type"] == "text":
                out.append(UserMessage(b["text"]))
            elif (part := anthropic_media(b)) is not None:
                last = out[-1] if out else None
                if isinstance(last, UserMessage):  # after the text it follows
                    out[-1] = UserMessage(last.content, (*last.parts, part))
                else:
                    out.append(UserMessage("", (part,)))
    return out


def _media(blocks: list[dict[str, Any]]) -> tuple[MediaPart, ...]:
    found = [anthropic_media(b) for b in blocks]
    return tuple(p for p in found if p is not None)


class LoopbackAnthropicServer(LoopbackServer):
    """``POST /v1/messages`` with Claude's thinking rules (see the module)."""

    path_suffix = "/v1/messages"

    def __init__(
        self,
        model: Model,
        *,
        redact: bool = False,
        min_cache_tokens: int = 1024,
        **options: Any,
    ) -> None:
        super().__init__(model, **options)
        self.redact = redact
        self.cache = PromptCache(min_tokens=min_cache_tokens)
        self.cache_uses: list[CacheUse] = []
        self.rejected: list[tuple[int, str]] = []
        self._key = secrets.token_bytes(32)
        self._local = threading.local()

    # -- signatures: opaque to the client, checkable here ----------------------------------

    def _mac(self, model: str, payload: str) -> str:
        return hmac.new(self._key, f"{model}\0{payload}".encode(), hashlib.sha256).hexdigest()

    def sign(self, model: str, thinking: str) -> str:
        raw = f"{model}\0{self._mac(model, thinking)}".encode()
        return base64.b64encode(raw).decode()

    def _signer(self, token: Any, payload: str) -> str | None:
        """The model that made a signature over ``payload``, or None if it is not ours."""
        try:
            model, mac = base64.b64decode(str(token), validate=True).decode().split("\0")
        except (ValueError, UnicodeDecodeError):
            return None
        return model if hmac.compare_digest(mac, self._mac(model, payload)) else None

    def redacted(self, model: str) -> str:
        nonce = secrets.token_hex(8)
        return self.sign(model, f"redacted:{nonce}") + f".{nonce}"

    def _redacted_signer(self, data: Any) -> str | None:
        token, _, nonce = str(data).partition(".")
        return self._signer(token, f"redacted:{nonce}")

    # -- the rules -------------------------------------------------------------------------

    def thinks(self, body: dict[str, Any]) -> bool:
        """Whether this request runs with thinking on."""
        if _ALWAYS.search(str(body.get("model", "")).lower()):
            # "Adaptive thinking is always on" for Fable 5.x (Fable 5.1 migration guide,
            # https://platform.claude.com/docs/en/models/fable-5-1/migration-guide)
            return True
        kind = (body.get("thinking") or {}).get("type")
        return kind in ("adaptive", "enabled")

    def violation(self, body: dict[str, Any]) -> str | None:
        """The 400 message for a request that breaks a rule, or None."""
        model = str(body.get("model", ""))
        wire = body.get("messages") or []
        marks = breakpoint_count(body)
        if marks > MAX_BREAKPOINTS:
            # "You can define up to 4 cache breakpoints" (prompt caching)
            return TOO_MANY_BREAKPOINTS.format(n=marks)
        if _ALWAYS.search(model.lower()):
            kind = (body.get("thinking") or {}).get("type")
            if kind in ("disabled", "enabled"):
                # "Both thinking: {type: "disabled"} and manual extended thinking (thinking:
                # {type: "enabled", budget_tokens: N}) return a 400 error" (Fable 5.1 guide)
                return THINKING_TYPE.format(kind=kind)
            if wire and wire[-1].get("role") == "assistant":
                # "Prefill: prefilling assistant messages returns a 400 error" (Fable 5.1 guide)
                return PREFILL
        effort = (body.get("output_config") or {}).get("effort")
        if effort is not None and effort not in ("low", "medium", "high", "xhigh", "max"):
            # "Valid values are `low`, `medium`, `high`, `xhigh`, or `max`" (the SDK's
            # OutputConfigParam, after the API reference)
            return EFFORT
        if not self.thinks(body):
            return None
        temperature, top_p = body.get("temperature"), body.get("top_p")
        if (temperature is not None and temperature != 1) or (
            top_p is not None and not 0.95 <= top_p <= 1
        ):
            # "Thinking isn't compatible with temperature or top_k modifications ... you can
            # set top_p to values between 1 and 0.95" (extended thinking, "Feature
            # compatibility")
            return SAMPLING
        if (body.get("tool_choice") or {}).get("type") in ("any", "tool"):
            # "tool_choice options that force tool use return an error while thinking is
            # on" (https://platform.claude.com/docs/en/build-with-claude/thinking-tool-workflows)
            return FORCED_TOOL
        return self._signatures(wire, model) or self._cycle(wire)

    def _signatures(self, wire: list[dict[str, Any]], model: str) -> str | None:
        # "the signature field ... is used to verify that thinking blocks were generated by
        # Claude"; a changed block is refused (extended thinking, "Thinking encryption").
        # "Only Claude Fable 5.2 and Claude Mythos 5.2 read Claude Fable 5.2 thinking blocks"
        # (https://platform.claude.com/docs/en/models/fable-5-2/whats-new-fable-5-2).
        for i, m in enumerate(wire):
            if m.get("role") != "assistant" or isinstance(m.get("content"), str):
                continue
            for j, b in enumerate(m["content"]):
                kind = b.get("type")
                if kind == "thinking":
                    signer = self._signer(b.get("signature"), str(b.get("thinking")))
                elif kind == "redacted_thinking":
                    signer = self._redacted_signer(b.get("data"))
                else:
                    continue
                if signer != model:
                    text = INVALID_SIGNATURE if kind == "thinking" else INVALID_REDACTED
                    return text.format(i=i, j=j)
        return None

    def _cycle(self, wire: list[dict[str, Any]]) -> str | None:
        # "When thinking is on and the model calls a tool, the assistant turn holding the
        # tool_use must be sent back with its thinking blocks first" (extended thinking,
        # "Preserving thinking blocks"; the 400 text is the API's own).
        last = max((i for i, m in enumerate(wire) if m.get("role") == "assistant"), default=-1)
        if last < 0 or isinstance(wire[last].get("content"), str):
            return None
        blocks = wire[last]["content"]
        if not any(b.get("type") == "tool_use" for b in blocks):
            return None
        first = blocks[0].get("type") if blocks else "none"
        if first in _THINKING:
            return None
        return EXPECTED_THINKING.format(i=last, found=first)

    # -- one request -----------------------------------------------------------------------

    def handle(self, path: str, raw: bytes) -> tuple[int, dict[str, str], bytes]:
        try:
            body = json.loads(raw)
        except ValueError:
            return super().handle(path, raw)
        problem = self.violation(body) if isinstance(body, dict) else None
        if problem is not None:
            with self._lock:
                self.request_count += 1
                self.rejected.append((400, problem))
            return self._error(400, problem, "invalid_request_error", retry=False)
        self._local.body = body
        self._local.cache_use = None
        return super().handle(path, raw)

    def parse(self, body: dict[str, Any]) -> tuple[list[Message], list[ToolSpec]]:
        tools = [
            ToolSpec(t["name"], t.get("description", ""), t["input_schema"])
            for t in body.get("tools") or ()
        ]
        return messages_from_anthropic(body), tools

    def _thinking_blocks(self, model: str) -> list[dict[str, Any]]:
        body = getattr(self._local, "body", {})
        if not self.thinks(body):
            return []
        thought = f"Thinking it over (request {next(_ids)})."
        out = [{"type": "thinking", "thinking": thought, "signature": self.sign(model, thought)}]
        if self.redact:
            out.append({"type": "redacted_thinking", "data": self.redacted(model)})
        return out

    def _cache_use(self, response: ModelResponse) -> CacheUse:
        """This request's use of the emulated cache, worked out once (scripted reads win)."""
        u = response.usage
        if u.cache_read_tokens:
            return CacheUse(read=u.cache_read_tokens, prompt=u.input_tokens)
        use = getattr(self._local, "cache_use", None)
        if use is None:
            use = self.cache.use(getattr(self._local, "body", {}), u.input_tokens)
            self._local.cache_use = use
            with self._lock:
                self.cache_uses.append(use)
        return use

    def _usage(self, response: ModelResponse) -> dict[str, Any]:
        u, use = response.usage, self._cache_use(response)
        return {
            "input_tokens": max(use.prompt - use.read - use.written, 0),
            "output_tokens": u.output_tokens,
            "cache_read_input_tokens": use.read,
            "cache_creation_input_tokens": use.written,
            "cache_creation": {
                "ephemeral_5m_input_tokens": use.written_5m,
                "ephemeral_1h_input_tokens": use.written_1h,
            },
        }

    def _stop(self, response: ModelResponse) -> str:
        if response.finish_reason == "refusal":
            return "refusal"
        if response.message.tool_calls:
            return "tool_use"
        return _STOP.get(response.finish_reason, "end_turn")

    def _stop_details(self, response: ModelResponse) -> dict[str, Any] | None:
        # "A declined request returns stop_reason: "refusal" with a stop_details.category"
        # (Fable 5.1 migration guide), as HTTP 200.
        if response.finish_reason != "refusal":
            return None
        return {"type": "refusal", "category": "cyber", "explanation": None}

    def _content(self, response: ModelResponse, model: str) -> list[dict[str, Any]]:
        if response.finish_reason == "refusal":
            return []
        m = response.message
        content = self._thinking_blocks(model)
        content += [{"type": "text", "text": m.content}] if m.content else []
        content += [
            {"type": "tool_use", "id": t.id, "name": t.name, "input": json.loads(t.arguments)}
            for t in m.tool_calls
        ]
        return content

    def render(self, response: ModelResponse, model: str) -> dict[str, Any]:
        return {
            "id": f"msg_loopback_{next(_ids)}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": self._content(response, model),
            "stop_reason": self._stop(response),
            "stop_details": self._stop_details(response),
            "stop_sequence": None,
            "usage": self._usage(response),
        }

    def render_stream(self, response: ModelResponse, body: dict[str, Any]) -> bytes:
        model = str(body.get("model", ""))
        whole = self.render(response, model)
        start = {**whole, "content": [], "stop_reason": None, "stop_details": None}
        start["usage"] = {**self._usage(response), "output_tokens": 1}
        events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
        for index, block in enumerate(whole["content"]):
            events += self._block_events(index, block)
        delta = {
            "stop_reason": whole["stop_reason"],
            "stop_sequence": None,
            "stop_details": whole["stop_details"],
        }
        usage = {"output_tokens": response.usage.output_tokens}
        events.append({"type": "message_delta", "delta": delta, "usage": usage})
        events.append({"type": "message_stop"})
        return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()

    def _block_events(self, index: int, block: dict[str, Any]) -> list[dict[str, Any]]:
        # event shapes: "Streaming thinking" (extended thinking) and streaming messages
        kind = block["type"]
        if kind == "thinking":
            start = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": p} for p in self.chunks(block[kind])]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif kind == "text":
            start = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in self.chunks(block["text"])]
        elif kind == "tool_use":
            start = {**block, "input": {}}
            pieces = self.chunks(json.dumps(block["input"]))
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in pieces]
        else:
            start, deltas = block, []
        events = [{"type": "content_block_start", "index": index, "content_block": start}]
        events += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
        events.append({"type": "content_block_stop", "index": index})
        return events

    def error_body(self, status: int, message: str, code: str) -> dict[str, Any]:
        if code == "context_length_exceeded":
            message, code = f"prompt is too long: {message}", "invalid_request_error"
        return {"type": "error", "error": {"type": code, "message": message}}
