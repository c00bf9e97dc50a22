"""A loopback emulation of the Gemini API's ``generateContent`` rules, over real HTTP.

:class:`LoopbackGeminiServer` answers ``POST /v1beta/models/<model>:generateContent`` and
``:streamGenerateContent?alt=sse`` from a :class:`~retinue.llm.testing.ScriptedModel` on
127.0.0.1 (point :class:`~retinue.llm.gemini.GeminiModel` at ``base_url``; the official SDK
takes it through ``http_options``), and refuses what Gemini refuses, with its error texts.
Each rule, and where it is written:

* **G1** Gemini 3 and later return a thought signature with every response that has a
  function call -- "the first functionCall part" of a response with parallel calls, each
  step's call for sequential ones -- and one "in the last part" of a response without calls
  (ai.google.dev/gemini-api/docs/thought-signatures, "How it works"). While streaming, a
  text answer's signature may come in a last chunk whose text part is empty (same page,
  "Streaming").
* **G2** "Strict validation is enforced on all function calls within the current turn. (Only
  the current turn is required; we do not validate previous turns)": the current turn starts
  at the latest user content with standard content (text), not a ``functionResponse``; "the
  first functionCall part in each step of the current turn must include its
  thought_signature", or 400 INVALID_ARGUMENT: "Function call is missing a thought_signature
  in functionCall parts. This is required for tools to work correctly, and missing
  thought_signature may lead to degraded model performance. Additional data, function call
  `default_api:<name>` , position <n>." (the text reported in block/goose#5792 and
  microsoft/semantic-kernel#13417). The FAQ's placeholder ``skip_thought_signature_validator``
  passes validation.
* **G3** "You must return this signature in the exact part where it was received" and pass
  it back "exactly as received": a signature this server did not give out, changed, sent for
  another model, or moved to another part is refused, 400 INVALID_ARGUMENT "Corrupted thought
  signature." (the "Invalid / Corrupted thought signature" case of docs.apiyi.com's Gemini
  FAQ, 2026-10; Google does not publish the text).
* **G4** A function call turn "comes immediately after a user turn or after a function
  response turn", and each function response turn answers every call of the turn before it:
  400 "Please ensure that function call turn comes immediately after a user turn or after a
  function response turn." (google-gemini/gemini-cli#11814: also when the history starts
  with a function call; continuedev/continue#11164) and "Please ensure that the number of
  function response parts is equal to the number of function call parts of the function call
  turn." (google-gemini/gemini-cli#4217, #16415).
* **G5** ``thinkingConfig`` with both ``thinkingLevel`` and ``thinkingBudget`` is a 400: "You
  cannot use both thinking_level and thinking_budget in the same request. Doing so will
  return a 400 error" (ai.google.dev/gemini-api/docs/gemini-3, as the gemini_ex
  ThinkingConfig docs quote it); the error's text is not published, the emulator's is its own.
* **G6** A scripted ``finish_reason="refusal"`` is answered as a safety stop: HTTP 200, a
  candidate with ``finishReason: "SAFETY"`` and no content; ``finish_reason="blocked"`` as a
  blocked prompt: ``promptFeedback.blockReason: "PROHIBITED_CONTENT"`` and no candidate
  (the API reference, ``GenerateContentResponse``).

``rejected`` lists every refusal as ``(status, message)``; ``call_ids=False`` sends function
calls without an ``id`` (the field is optional in the API reference's ``FunctionCall``).
Errors are Google's JSON error shape: ``{"error": {"code", "message", "status"}}``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from retinue.errors import ContextTooLongError, ModelError
from retinue.llm._gemini_wire import SKIP_SIGNATURE, messages_from_gemini, requires_signatures
from retinue.llm.base import ModelResponse, ToolSpec
from retinue.llm.loopback import LoopbackServer

__all__ = ["LoopbackGeminiServer"]

_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}
MISSING = (
    "Function call is missing a thought_signature in functionCall parts. This is required for "
    "tools to work correctly, and missing thought_signature may lead to degraded model "
    "performance. Additional data, function call `default_api:{name}` , position {position}."
)
CORRUPTED = "Corrupted thought signature."
THINKING_BOTH = "thinking_level and thinking_budget cannot be set in the same request."
CALL_ORDER = (
    "Please ensure that function call turn comes immediately after a user turn or after a "
    "function response turn."
)
RESPONSE_COUNT = (
    "Please ensure that the number of function response parts is equal to the number of "
    "function call parts of the function call turn."
)


class _Rejected(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class _Issued:
    """Where a signature was given out: the model and the part (a call's name, or text)."""

    model: str
    part: str


def _field(d: dict[str, Any], camel: str, snake: str) -> Any:
    return d.get(camel, d.get(snake))


class LoopbackGeminiServer(LoopbackServer):
    """Gemini's ``generateContent`` with the rules of the module."""

    base_path = ""

    def __init__(self, *args: Any, call_ids: bool = True, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.call_ids = call_ids  # False: calls come without ``id``, as the API may send them
        self.rejected: list[tuple[int, str]] = []
        self._secret = secrets.token_bytes(16)
        self._issued: dict[bytes, _Issued] = {}  # by the signature's bytes

    def error_body(self, status: int, message: str, code: str) -> dict[str, Any]:
        return {"error": {"code": status, "message": message, "status": _STATUS.get(status, code)}}

    def handle(self, path: str, raw: bytes) -> tuple[int, dict[str, str], bytes]:
        route, _, query = path.partition("?")
        head, _, method = unquote(route).rpartition(":")
        model = head.rsplit("/models/", 1)[-1]
        if method not in ("generateContent", "streamGenerateContent") or "/models/" not in head:
            with self._lock:
                self.request_count += 1
            return self._error(404, f"no route {path}", "NOT_FOUND", retry=False)
        try:
            body = json.loads(raw)
            self.check(model, body)
            messages = messages_from_gemini(body)
        except _Rejected as exc:
            with self._lock:
                self.request_count += 1
                self.rejected.append((exc.status, str(exc)))
            return self._error(exc.status, str(exc), "INVALID_ARGUMENT", retry=False)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            with self._lock:
                self.request_count += 1
            return self._error(400, f"Invalid JSON payload: {exc}", "INVALID_ARGUMENT", retry=False)
        with self._lock:
            self.request_count += 1
            failure = self.fail_first.popleft() if self.fail_first else self.fail_always
            if failure is None and self.record:
                self.requests.append({"model": model, **body})
        if failure is not None:
            return self._error(failure, f"simulated HTTP {failure}", "simulated", retry=True)
        try:
            response = self._ask(messages, _tools(body))
        except ContextTooLongError as exc:
            message = f"The input token count exceeds the maximum number of tokens allowed. {exc}"
            return self._error(400, message, "INVALID_ARGUMENT", retry=False)
        except ModelError as exc:
            return self._error(exc.status_code or 500, str(exc), "INTERNAL", retry=True)
        except Exception as exc:
            return self._error(500, f"{type(exc).__name__}: {exc}", "INTERNAL", retry=False)
        data = self.render_response(response, model)
        if method == "streamGenerateContent":
            return (
                200,
                {"Content-Type": "text/event-stream"},
                self._stream(data, sse="alt=sse" in query),
            )
        return 200, {"Content-Type": "application/json"}, json.dumps(data).encode()

    # -- the rules ---------------------------------------------------------------------------

    def check(self, model: str, body: dict[str, Any]) -> None:
        """Raise :class:`_Rejected` when ``body`` breaks rules G2 to G5."""
        config = _field(body, "generationConfig", "generation_config") or {}
        thinking = _field(config, "thinkingConfig", "thinking_config") or {}
        level = _field(thinking, "thinkingLevel", "thinking_level")
        budget = _field(thinking, "thinkingBudget", "thinking_budget")
        if level is not None and budget is not None:
            raise _Rejected(400, THINKING_BOTH)
        contents: list[dict[str, Any]] = list(body.get("contents") or ())
        turn_start = -1
        for i, content in enumerate(contents):
            parts = content.get("parts") or []
            if content.get("role") != "model" and any("text" in p for p in parts):
                turn_start = i
        previous: dict[str, Any] | None = None
        for i, content in enumerate(contents):
            parts = content.get("parts") or []
            calls = [p for p in parts if _field(p, "functionCall", "function_call")]
            responses = [p for p in parts if _field(p, "functionResponse", "function_response")]
            if content.get("role") == "model":
                if calls and (previous is None or previous.get("role") == "model"):
                    raise _Rejected(400, CALL_ORDER)
                for part in parts:
                    self._check_signature(part, model)
                if calls and i > turn_start and requires_signatures(model):
                    first = calls[0]
                    if not _field(first, "thoughtSignature", "thought_signature"):
                        name = _field(first, "functionCall", "function_call").get("name")
                        raise _Rejected(400, MISSING.format(name=name, position=i + 1))
            elif responses:
                asked = previous if previous and previous.get("role") == "model" else {}
                n_calls = sum(
                    1 for p in asked.get("parts", ()) if _field(p, "functionCall", "function_call")
                )
                if n_calls != len(responses):
                    raise _Rejected(400, RESPONSE_COUNT)
            previous = content

    def _check_signature(self, part: dict[str, Any], model: str) -> None:
        sig = _field(part, "thoughtSignature", "thought_signature")
        if not sig or sig == SKIP_SIGNATURE:
            return
        issued = self._issued.get(_decoded(sig))
        call = _field(part, "functionCall", "function_call")
        where = f"call:{call.get('name')}" if call else "text"
        if issued is None or issued.model != model or issued.part != where:
            raise _Rejected(400, CORRUPTED)

    def _sign(self, model: str, part: str) -> str:
        nonce = secrets.token_bytes(12)
        mac = hmac.new(self._secret, nonce + f"{model}/{part}".encode(), hashlib.sha256).digest()
        sig = base64.b64encode(nonce + mac).decode()
        self._issued[_decoded(sig)] = _Issued(model, part)
        return sig

    # -- answers -----------------------------------------------------------------------------

    def render_response(self, response: ModelResponse, model: str) -> dict[str, Any]:
        """The ``GenerateContentResponse`` for ``response`` (rules G1 and G6)."""
        usage = _usage(response, thinking=requires_signatures(model))
        if response.finish_reason == "blocked":
            return {
                "promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},
                "usageMetadata": usage,
                "modelVersion": model,
            }
        if response.finish_reason == "refusal":
            candidate: dict[str, Any] = {
                "finishReason": "SAFETY",
                "index": 0,
                "safetyRatings": [
                    {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH"}
                ],
            }
            return {"candidates": [candidate], "usageMetadata": usage, "modelVersion": model}
        m = response.message
        parts: list[dict[str, Any]] = []
        if m.content:
            parts.append({"text": m.content})
        for t in m.tool_calls:
            call: dict[str, Any] = {"name": t.name, "args": json.loads(t.arguments or "{}")}
            if t.id and self.call_ids:
                call["id"] = t.id
            parts.append({"functionCall": call})
        if requires_signatures(model) and parts:
            calls = [p for p in parts if "functionCall" in p]
            target = calls[0] if calls else parts[-1]
            where = f"call:{target['functionCall']['name']}" if calls else "text"
            target["thoughtSignature"] = self._sign(model, where)
        finish = "MAX_TOKENS" if response.finish_reason == "length" else "STOP"
        return {
            "candidates": [
                {"content": {"role": "model", "parts": parts}, "finishReason": finish, "index": 0}
            ],
            "usageMetadata": usage,
            "modelVersion": model,
            "responseId": secrets.token_hex(8),
        }

    def _stream(self, data: dict[str, Any], *, sse: bool) -> bytes:
        """The response as SSE chunks: text in pieces, calls whole in the last chunk with the
        finish reason and usage; a text answer's signature in a last, empty text part."""
        candidates = data.get("candidates")
        if not candidates or "content" not in candidates[0]:
            chunks = [data]
        else:
            head = {k: v for k, v in data.items() if k not in ("candidates", "usageMetadata")}
            parts = candidates[0]["content"]["parts"]
            chunks = []
            tail: list[dict[str, Any]] = []
            for part in parts:
                if "text" in part:
                    sig = part.get("thoughtSignature")
                    chunks += [
                        {**head, "candidates": [_chunk([{"text": piece}])]}
                        for piece in self.chunks(part["text"])
                    ]
                    if sig:
                        tail.append({"text": "", "thoughtSignature": sig})
                else:
                    tail.append(part)
            last = _chunk(tail or [{"text": ""}])
            last["finishReason"] = candidates[0]["finishReason"]
            chunks.append({**head, "candidates": [last], "usageMetadata": data["usageMetadata"]})
        if not sse:
            return json.dumps(chunks).encode()
        return "".join(f"data: {json.dumps(c)}\r\n\r\n" for c in chunks).encode()


def _decoded(sig: str) -> bytes:
    """A signature's bytes: proto3 JSON reads bytes as standard or URL-safe base64, with or
    without padding (protobuf.dev/programming-guides/json); a string that is neither is no
    signature this server gave out."""
    text = sig.replace("-", "+").replace("_", "/")
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except ValueError:
        return b""


def _chunk(parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {"content": {"role": "model", "parts": parts}, "index": 0}


def _tools(body: dict[str, Any]) -> list[ToolSpec]:
    out: list[ToolSpec] = []
    for tool in body.get("tools") or ():
        for d in _field(tool, "functionDeclarations", "function_declarations") or ():
            schema = (
                _field(d, "parametersJsonSchema", "parameters_json_schema")
                or d.get("parameters")
                or {"type": "object"}
            )
            out.append(ToolSpec(str(d.get("name", "")), str(d.get("description") or ""), schema))
    return out


def _usage(response: ModelResponse, *, thinking: bool) -> dict[str, Any]:
    u = response.usage
    thoughts = min(u.output_tokens, 8) if thinking else 0
    usage = {
        "promptTokenCount": u.input_tokens,
        "candidatesTokenCount": u.output_tokens - thoughts,
        "totalTokenCount": u.input_tokens + u.output_tokens,
    }
    if thoughts:
        usage["thoughtsTokenCount"] = thoughts
    if u.cache_read_tokens:
        usage["cachedContentTokenCount"] = u.cache_read_tokens
    return usage
