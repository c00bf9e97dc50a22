"""A loopback emulation of OpenAI's ``/v1/responses`` and ``/v1/chat/completions`` rules.

:class:`LoopbackResponsesServer` answers from a :class:`~retinue.llm.testing.ScriptedModel`
over real HTTP on 127.0.0.1, as :class:`~retinue.llm.loopback.LoopbackOpenAIServer` does, and
refuses what OpenAI refuses, with OpenAI's own error texts. Each rule, and where it is written:

``/v1/chat/completions``

* **C1** A reasoning model of the gpt-5.2 generation or later (gpt-5.4, the gpt-5.6 family,
  gpt-6) answers 400 to function tools while it reasons; leaving ``reasoning_effort`` out does
  not help, it defaults to ``medium``: "Function tools with reasoning_effort are not supported
  for <model> in /v1/chat/completions. To use function tools, use /v1/responses or set
  reasoning_effort to 'none'." (openai/openai-openapi#541, pipecat-ai/pipecat#4043,
  livekit/agents#5088, aaif-goose/goose#11413; the same error reported for gpt-5.5 on
  errs.dmxapi.cn/detail.php?id=2753). ``reasoning_effort: "none"`` is accepted.

``/v1/responses``

* **R1** A reasoning model emits a ``reasoning`` item (``rs_…``) before its message and
  function calls (cookbook.openai.com/examples/responses_api/reasoning_items). Its
  ``encrypted_content`` is returned only when ``include`` holds
  ``"reasoning.encrypted_content"`` (Responses API reference, ``include``: "enables reasoning
  items to be used in multi-turn conversations when using the Responses API statelessly (like
  when the store parameter is set to false ...)").
* **R2** With ``store: false`` nothing is kept, so a reasoning item sent back by id alone is
  a 404: "Item with id 'rs_…' not found. Items are not persisted when `store` is set to
  false. Try again with `store` set to true, or remove this item from your input."
  (can1357/oh-my-pi#41, anomalyco/opencode#7724, vercel/ai#7543).
* **R3** ``encrypted_content`` must come back as it was given, to the model that made it; a
  changed one is refused ("a corrupted content would return an error":
  community.openai.com/t/1355946): 400 "The encrypted content for item rs_… could not be
  verified."
* **R4** A ``function_call`` of the turn in progress (after the last user message) that
  followed a reasoning item must be sent back with that item before it, in the same run of
  output items: 400 "Item 'fc_…' of type 'function_call' was provided without its required
  'reasoning' item: 'rs_…'." (community.openai.com/t/1236046 and /1355347: calls grouped
  after their reasoning, outputs after the calls). Earlier turns' reasoning is not required:
  "reasoning items from turn 1 are ignored and removed, since the model does not reuse
  reasoning items from previous turns" (cookbook.openai.com/examples/responses_api/
  reasoning_items), so a history whose finished turns lost theirs (compression) is accepted.
* **R5** A reasoning item must be followed by an output item: 400 "Item 'rs_…' of type
  'reasoning' was provided without its required following item." (community.openai.com/t/1236046).
* **R6** A ``function_call_output`` needs its ``function_call`` earlier in the input: 400 "No
  tool call found for function call output with call_id <id>." (continuedev/continue#10092).
* **R7** Every ``function_call`` in the input needs its output: 400 "No tool output found for
  function call <id>." (tjardoo/openai-client#124).
* **R8** A reasoning model takes only the default ``temperature`` and ``top_p`` (1): 400
  "Unsupported value: 'temperature' does not support 0.2 with this model. Only the default
  (1) value is supported." (community.openai.com/t/gpt-5-models-temperature/1337957).

``rejected`` lists every refusal as ``(status, message)``; a scripted step with
``finish_reason="refusal"`` is answered as a ``refusal`` content part.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import json
import re
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from retinue.errors import ContextTooLongError, ModelError
from retinue.llm._responses_wire import messages_from_responses, tools_from_responses
from retinue.llm.base import ModelResponse
from retinue.llm.loopback import LoopbackOpenAIServer

__all__ = ["LoopbackResponsesServer", "chat_tools_refusal", "reasons_by_default"]

_ids = itertools.count(1)
_REASONING = re.compile(r"^(gpt-5|gpt-6|o[1-9])")  # reasoning on by default
_NO_CHAT_TOOLS = re.compile(r"^gpt-(5\.([2-9]|\d\d)|[6-9])")  # C1: gpt-5.2 and later
INCLUDE_ENCRYPTED = "reasoning.encrypted_content"


def reasons_by_default(model: str) -> bool:
    return bool(_REASONING.match(model))


def chat_tools_refusal(body: dict[str, Any]) -> str | None:
    """Rule C1's error text for a Chat Completions body, or None when it is accepted."""
    model = str(body.get("model", ""))
    effort = body.get("reasoning_effort") or "medium"
    if body.get("tools") and effort != "none" and _NO_CHAT_TOOLS.match(model):
        return (
            f"Function tools with reasoning_effort are not supported for {model} in "
            "/v1/chat/completions. To use function tools, use /v1/responses or set "
            "reasoning_effort to 'none'."
        )
    return None


class _Rejected(Exception):
    """A request the emulated rules refuse (caught in this module, answered as HTTP)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(slots=True)
class _Issued:
    """A reasoning item this server emitted: its content and the calls it preceded."""

    encrypted: str
    model: str
    calls: list[str] = field(default_factory=list)


class LoopbackResponsesServer(LoopbackOpenAIServer):
    """OpenAI's ``/v1/responses`` and ``/v1/chat/completions`` with the rules of the module."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.rejected: list[tuple[int, str]] = []
        self._secret = secrets.token_bytes(16)
        self._issued: dict[str, _Issued] = {}  # rs id -> what was given out
        self._call_reasoning: dict[str, tuple[str, str]] = {}  # call_id -> (fc id, rs id)
        self._stored: set[str] = set()  # item ids kept by requests with store true

    def handle(self, path: str, raw: bytes) -> tuple[int, dict[str, str], bytes]:
        route = path.rstrip("/")
        if route.endswith("/chat/completions"):
            try:
                refusal = chat_tools_refusal(json.loads(raw))
            except ValueError:
                refusal = None
            if refusal is not None:
                return self._reject(_Rejected(400, refusal))
            return super().handle(path, raw)
        if not route.endswith("/responses"):
            return super().handle(path, raw)  # a 404, as the base answers unknown routes
        return self._responses(raw)

    def _reject(self, exc: _Rejected) -> tuple[int, dict[str, str], bytes]:
        with self._lock:
            self.request_count += 1
            self.rejected.append((exc.status, str(exc)))
        return self._error(exc.status, str(exc), "invalid_request_error", retry=False)

    def error_body(self, status: int, message: str, code: str) -> dict[str, Any]:
        return {"error": {"message": message, "type": code, "param": "input", "code": None}}

    # -- /v1/responses ----------------------------------------------------------------------

    def _responses(self, raw: bytes) -> tuple[int, dict[str, str], bytes]:
        try:
            body = json.loads(raw)
            self.check(body)
            messages = messages_from_responses(body)
            tools = tools_from_responses(body.get("tools") or [])
        except _Rejected as exc:
            return self._reject(exc)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            return self._reject(_Rejected(400, f"bad request: {exc}"))
        with self._lock:
            self.request_count += 1
            failure = self.fail_first.popleft() if self.fail_first else self.fail_always
            if failure is None and self.record:
                self.requests.append(body)
        if failure is not None:
            return self._error(failure, f"simulated HTTP {failure}", "simulated", retry=True)
        try:
            response = self._ask(messages, tools)
        except ContextTooLongError as exc:
            return self._error(400, str(exc), "context_length_exceeded", retry=False)
        except ModelError as exc:
            return self._error(exc.status_code or 500, str(exc), "model_error", retry=True)
        except Exception as exc:
            return self._error(500, f"{type(exc).__name__}: {exc}", "server_error", retry=False)
        data = self.render_response(response, body)
        if body.get("stream"):
            return 200, {"Content-Type": "text/event-stream"}, _stream(data)
        return 200, {"Content-Type": "application/json"}, json.dumps(data).encode()

    def check(self, body: dict[str, Any]) -> None:
        """Raise :class:`_Rejected` when ``body`` breaks rules R2 to R8."""
        raw = body.get("input")
        items: list[dict[str, Any]] = [] if isinstance(raw, str) else list(raw or ())
        model, store = str(body.get("model", "")), body.get("store", True) is not False
        for name in ("temperature", "top_p"):
            value = body.get(name)
            if value is not None and value != 1 and reasons_by_default(model):
                raise _Rejected(
                    400,
                    f"Unsupported value: '{name}' does not support {value} with this model. "
                    "Only the default (1) value is supported.",
                )
        calls: set[str] = set()
        answered: set[str] = set()
        run: set[str] = set()  # reasoning ids in the current run of output items
        users = [i for i, item in enumerate(items) if item.get("role") == "user"]
        turn_start = users[-1] if users else -1  # R4 holds for the turn in progress
        for i, item in enumerate(items):
            kind = item.get("type") or "message"
            output = kind in ("reasoning", "function_call") or item.get("role") == "assistant"
            if not output:
                run = set()
            if kind == "reasoning":
                self._check_reasoning(item, model, store, items[i + 1 : i + 2])
                run.add(str(item.get("id")))
            elif kind == "function_call":
                call_id = str(item.get("call_id"))
                fc, rs = self._call_reasoning.get(call_id, ("", ""))
                if rs and rs not in run and i > turn_start:
                    raise _Rejected(
                        400,
                        f"Item '{fc}' of type 'function_call' was provided without its "
                        f"required 'reasoning' item: '{rs}'.",
                    )
                calls.add(call_id)
            elif kind == "function_call_output":
                call_id = str(item.get("call_id"))
                if call_id not in calls:
                    raise _Rejected(
                        400, f"No tool call found for function call output with call_id {call_id}."
                    )
                answered.add(call_id)
        for call_id in sorted(calls - answered):
            raise _Rejected(400, f"No tool output found for function call {call_id}.")

    def _check_reasoning(
        self, item: dict[str, Any], model: str, store: bool, following: list[dict[str, Any]]
    ) -> None:
        rs = str(item.get("id"))
        encrypted = item.get("encrypted_content")
        if encrypted is None:
            if not store or rs not in self._stored:
                raise _Rejected(
                    404,
                    f"Item with id '{rs}' not found. Items are not persisted when `store` is "
                    "set to false. Try again with `store` set to true, or remove this item "
                    "from your input.",
                )
        else:
            issued = self._issued.get(rs)
            if issued is None or issued.encrypted != encrypted or issued.model != model:
                raise _Rejected(400, f"The encrypted content for item {rs} could not be verified.")
        nxt = following[0] if following else {}
        if not (nxt.get("type") == "function_call" or nxt.get("role") == "assistant"):
            raise _Rejected(
                400,
                f"Item '{rs}' of type 'reasoning' was provided without its required "
                "following item.",
            )

    def render_response(self, response: ModelResponse, body: dict[str, Any]) -> dict[str, Any]:
        """The Response object for ``response`` (rule R1 for a reasoning model)."""
        model = str(body.get("model", ""))
        effort = (body.get("reasoning") or {}).get("effort") or "medium"
        m = response.message
        output: list[dict[str, Any]] = []
        rs = ""
        if reasons_by_default(model) and effort != "none":
            rs = f"rs_{next(_ids):06d}{secrets.token_hex(4)}"
            output.append(self._reasoning_item(rs, model, body))
        if m.content or response.finish_reason == "refusal":
            output.append(_message_item(m.content, refusal=response.finish_reason == "refusal"))
        for t in m.tool_calls:
            call_id = t.id or f"call_{next(_ids)}"
            fc = f"fc_{next(_ids):06d}"
            output.append(
                {
                    "id": fc,
                    "type": "function_call",
                    "status": "completed",
                    "call_id": call_id,
                    "name": t.name,
                    "arguments": t.arguments,
                }
            )
            if rs:
                self._call_reasoning[call_id] = (fc, rs)
                self._issued[rs].calls.append(call_id)
        if body.get("store", True) is not False:
            self._stored.update(str(item["id"]) for item in output)
        incomplete = response.finish_reason == "length" and not m.tool_calls
        return {
            "id": f"resp_{next(_ids):06d}",
            "object": "response",
            "created_at": int(time.time()),
            "status": "incomplete" if incomplete else "completed",
            "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
            "error": None,
            "model": model,
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": body.get("tools") or [],
            "store": body.get("store", True),
            "reasoning": {"effort": effort if rs else None, "summary": None},
            "usage": _usage(response, reasoning=bool(rs)),
        }

    def _reasoning_item(self, rs: str, model: str, body: dict[str, Any]) -> dict[str, Any]:
        mac = hmac.new(self._secret, f"{model}/{rs}".encode(), hashlib.sha256).digest()
        encrypted = "gAAAAA" + base64.urlsafe_b64encode(mac).decode()
        self._issued[rs] = _Issued(encrypted, model)
        item: dict[str, Any] = {
            "id": rs,
            "type": "reasoning",
            "summary": [{"type": "summary_text", "text": "**Planning** the next step."}],
        }
        if INCLUDE_ENCRYPTED in (body.get("include") or ()):
            item["encrypted_content"] = encrypted
        return item


def _message_item(text: str, *, refusal: bool) -> dict[str, Any]:
    part = (
        {"type": "refusal", "refusal": text}
        if refusal
        else {"type": "output_text", "text": text, "annotations": []}
    )
    return {
        "id": f"msg_{next(_ids):06d}",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [part],
    }


def _usage(response: ModelResponse, *, reasoning: bool) -> dict[str, Any]:
    u = response.usage
    return {
        "input_tokens": u.input_tokens,
        "input_tokens_details": {"cached_tokens": u.cache_read_tokens},
        "output_tokens": u.output_tokens,
        "output_tokens_details": {"reasoning_tokens": min(u.output_tokens, 8) if reasoning else 0},
        "total_tokens": u.input_tokens + u.output_tokens,
    }


def _stream(data: dict[str, Any], chunk: int = 8) -> bytes:
    """The Response as the documented event stream: created, each output item added (text
    and arguments as deltas) and done, then completed with the whole response."""
    seq = itertools.count()
    events: list[dict[str, Any]] = []

    def emit(kind: str, **fields: Any) -> None:
        events.append({"type": kind, "sequence_number": next(seq), **fields})

    start = {**data, "status": "in_progress", "output": [], "usage": None}
    emit("response.created", response=start)
    emit("response.in_progress", response=start)
    for index, item in enumerate(data["output"]):
        emit("response.output_item.added", output_index=index, item=_opened(item))
        if item["type"] == "message":
            for c, part in enumerate(item["content"]):
                if part["type"] == "output_text":
                    text = part["text"]
                    for i in range(0, len(text), chunk):
                        emit(
                            "response.output_text.delta",
                            item_id=item["id"],
                            output_index=index,
                            content_index=c,
                            delta=text[i : i + chunk],
                            logprobs=[],
                        )
        elif item["type"] == "function_call":
            args = item["arguments"]
            for i in range(0, len(args), chunk):
                emit(
                    "response.function_call_arguments.delta",
                    item_id=item["id"],
                    output_index=index,
                    delta=args[i : i + chunk],
                )
        emit("response.output_item.done", output_index=index, item=item)
    final = "response.incomplete" if data["status"] == "incomplete" else "response.completed"
    emit(final, response=data)
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()


def _opened(item: dict[str, Any]) -> dict[str, Any]:
    if item["type"] == "message":
        return {**item, "status": "in_progress", "content": []}
    if item["type"] == "function_call":
        return {**item, "status": "in_progress", "arguments": ""}
    return {**item, "summary": []}
