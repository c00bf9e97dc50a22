"""A real HTTP model server on 127.0.0.1 whose answers come from a :class:`ScriptedModel`.

Tests and benchmarks point a real provider adapter (or the CLI, via ``OPENAI_BASE_URL``) at
it, so requests cross the SDK, HTTP and a socket exactly as in production::

    model = ScriptedModel(["Hello!"])
    with LoopbackOpenAIServer(model) as server:
        os.environ["OPENAI_BASE_URL"] = server.base_url     # http://127.0.0.1:PORT/v1
        ...                                                 # retinue run --model openai:x ...
    server.requests    # the JSON bodies the model answered

Failures:

* ``fail_first=[429, 500]`` answers the first requests with these statuses, then the model;
* ``fail_always=500`` answers every request with that status;
* a scripted step ``ContextTooLongError(...)`` becomes a 400 ``context_length_exceeded``;
  ``ModelError(..., status_code=N)`` becomes HTTP N; any other exception (an unscripted
  call, say) a 500 the client is told not to retry.

``requests`` holds the JSON bodies that reached the model (``record=False`` keeps none, for
long benchmarks); ``request_count`` counts every POST, failed ones included.

Error answers carry ``retry-after-ms`` (``retry_after_ms``, default 1 ms), so the SDK's
retries happen at once. Streaming (``"stream": true``) is answered as SSE, text split into
``chunk_size``-character deltas, usage included.

:class:`LoopbackServer` holds the HTTP machinery; a subclass supplies one wire dialect.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, ClassVar, Self

from retinue.errors import ContextTooLongError, ModelError
from retinue.llm._openai_wire import messages_from_openai, tools_from_openai
from retinue.llm.base import Model, ModelResponse, ToolSpec
from retinue.messages import Message

__all__ = ["LoopbackOpenAIServer", "LoopbackServer"]

_ids = itertools.count(1)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as real providers
    disable_nagle_algorithm = True  # or each kept-alive answer stalls ~40 ms on loopback
    loopback: ClassVar[LoopbackServer]

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        status, headers, payload = self.loopback.handle(self.path, raw)
        try:
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except ConnectionError:  # the client gave up (its timeout): nobody to answer
            self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _cancel_all_and_stop(loop: asyncio.AbstractEventLoop) -> None:
    for task in asyncio.all_tasks(loop):
        task.cancel()
    loop.call_soon(loop.stop)  # after the cancelled tasks have run their last step


class _Listener(ThreadingHTTPServer):
    """A threading HTTP server with room for bursts of connections (the default backlog
    of 5 stalls a client that opens hundreds at once)."""

    request_queue_size = 1024
    daemon_threads = True


class LoopbackServer:
    """HTTP machinery of a loopback model server; subclasses define the wire dialect."""

    path_suffix: ClassVar[str] = ""
    base_path: ClassVar[str] = ""

    def __init__(
        self,
        model: Model,
        *,
        fail_first: Iterable[int] = (),
        fail_always: int | None = None,
        retry_after_ms: int | None = 1,
        chunk_size: int = 8,
        record: bool = True,
    ) -> None:
        self.model = model
        self.fail_first: deque[int] = deque(fail_first)
        self.fail_always = fail_always
        self.retry_after_ms = retry_after_ms
        self.chunk_size = max(1, chunk_size)
        self.record = record
        self.requests: list[dict[str, Any]] = []
        self.request_count = 0
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._threads: list[threading.Thread] = []

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the loopback server is not started")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}{self.base_path}"

    def start(self) -> Self:
        handler = type("Handler", (_Handler,), {"loopback": self})
        self._httpd = _Listener(("127.0.0.1", 0), handler)
        self._loop = asyncio.new_event_loop()
        self._threads = [
            threading.Thread(target=self._loop.run_forever, daemon=True),
            # A short poll interval keeps close() quick (shutdown waits for one poll).
            threading.Thread(target=self._httpd.serve_forever, args=(0.05,), daemon=True),
        ]
        for t in self._threads:
            t.start()
        return self

    def close(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._loop is not None:
            self._loop.call_soon_threadsafe(_cancel_all_and_stop, self._loop)
        for t in self._threads:
            t.join(timeout=5)
        if self._loop is not None:
            self._loop.close()
        self._httpd, self._loop, self._threads = None, None, []

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- one request -----------------------------------------------------------------------

    def handle(self, path: str, raw: bytes) -> tuple[int, dict[str, str], bytes]:
        """Answer one POST: (status, headers, body)."""
        with self._lock:
            self.request_count += 1
            failure = self.fail_first.popleft() if self.fail_first else self.fail_always
        if not path.rstrip("/").endswith(self.path_suffix):
            return self._error(404, f"no route {path}", "not_found", retry=False)
        if failure is not None:
            return self._error(failure, f"simulated HTTP {failure}", "simulated", retry=True)
        try:
            body = json.loads(raw)
            messages, tools = self.parse(body)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            return self._error(400, f"bad request: {exc}", "invalid_request", retry=False)
        if self.record:
            with self._lock:
                self.requests.append(body)
        try:
            response = self._ask(messages, tools)
        except ContextTooLongError as exc:
            return self._error(400, str(exc), "context_length_exceeded", retry=False)
        except ModelError as exc:
            status = exc.status_code or 500
            return self._error(status, str(exc), "model_error", retry=True)
        except Exception as exc:
            return self._error(500, f"{type(exc).__name__}: {exc}", "server_error", retry=False)
        model_name = str(body.get("model", ""))
        if body.get("stream"):
            return 200, {"Content-Type": "text/event-stream"}, self.render_stream(response, body)
        payload = json.dumps(self.render(response, model_name)).encode()
        return 200, {"Content-Type": "application/json"}, payload

    def _ask(self, messages: list[Message], tools: list[ToolSpec]) -> ModelResponse:
        assert self._loop is not None
        coro = self.model.complete(messages, tools)
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=60)

    def _error(
        self, status: int, message: str, code: str, *, retry: bool
    ) -> tuple[int, dict[str, str], bytes]:
        headers = {"Content-Type": "application/json"}
        if not retry:
            headers["x-should-retry"] = "false"
        elif self.retry_after_ms is not None:
            headers["retry-after-ms"] = str(self.retry_after_ms)
        return status, headers, json.dumps(self.error_body(status, message, code)).encode()

    def chunks(self, text: str) -> list[str]:
        n = self.chunk_size
        return [text[i : i + n] for i in range(0, len(text), n)]

    # -- the dialect -----------------------------------------------------------------------

    def parse(self, body: dict[str, Any]) -> tuple[list[Message], list[ToolSpec]]:
        raise NotImplementedError

    def render(self, response: ModelResponse, model: str) -> dict[str, Any]:
        raise NotImplementedError

    def render_stream(self, response: ModelResponse, body: dict[str, Any]) -> bytes:
        raise NotImplementedError

    def error_body(self, status: int, message: str, code: str) -> dict[str, Any]:
        return {"error": {"message": message, "type": code, "code": code}}


class LoopbackOpenAIServer(LoopbackServer):
    """An OpenAI-compatible ``/v1/chat/completions`` endpoint on 127.0.0.1 (see the module)."""

    path_suffix = "/chat/completions"
    base_path = "/v1"

    def parse(self, body: dict[str, Any]) -> tuple[list[Message], list[ToolSpec]]:
        return messages_from_openai(body["messages"]), tools_from_openai(body.get("tools") or [])

    def render(self, response: ModelResponse, model: str) -> dict[str, Any]:
        m = response.message
        message: dict[str, Any] = {"role": "assistant", "content": m.content or None}
        if m.tool_calls:
            message["tool_calls"] = [
                {
                    "id": t.id,
                    "type": "function",
                    "function": {"name": t.name, "arguments": t.arguments},
                }
                for t in m.tool_calls
            ]
        return {
            **self._head(model, "chat.completion"),
            "choices": [{"index": 0, "message": message, "finish_reason": _finish(response)}],
            "usage": _usage(response),
        }

    def render_stream(self, response: ModelResponse, body: dict[str, Any]) -> bytes:
        head = self._head(str(body.get("model", "")), "chat.completion.chunk")

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

        m = response.message
        events = [chunk({"role": "assistant", "content": ""})]
        events += [chunk({"content": piece}) for piece in self.chunks(m.content)]
        for i, t in enumerate(m.tool_calls):
            start = {"index": i, "id": t.id, "type": "function"}
            events.append(
                chunk({"tool_calls": [{**start, "function": {"name": t.name, "arguments": ""}}]})
            )
            events += [
                chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
                for piece in self.chunks(t.arguments)
            ]
        events.append(chunk({}, _finish(response)))
        if (body.get("stream_options") or {}).get("include_usage"):
            events.append({**head, "choices": [], "usage": _usage(response)})
        lines = [f"data: {json.dumps(e)}\n\n" for e in events]
        lines.append("data: [DONE]\n\n")
        return "".join(lines).encode()

    def _head(self, model: str, kind: str) -> dict[str, Any]:
        return {
            "id": f"chatcmpl-{next(_ids)}",
            "object": kind,
            "created": int(time.time()),
            "model": model,
        }


def _finish(response: ModelResponse) -> str:
    return "tool_calls" if response.message.tool_calls else (response.finish_reason or "stop")


def _usage(response: ModelResponse) -> dict[str, Any]:
    u = response.usage
    return {
        "prompt_tokens": u.input_tokens,
        "completion_tokens": u.output_tokens,
        "total_tokens": u.input_tokens + u.output_tokens,
        "prompt_tokens_details": {"cached_tokens": u.cache_read_tokens},
    }
