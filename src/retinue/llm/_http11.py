"""A lean HTTP/1.1 POST over kept-alive plain-TCP connections: the hot request to local servers.

The ``openai`` SDK spends about ten times the socket's own CPU cost on each request (request
models, header objects, an auth hook, the transport stack). For a model on the same machine
(Ollama, vLLM, llama.cpp server) that cost is paid on every step of every agent, so
:class:`FastPoster` sends the one request that matters -- a non-streaming Chat Completions
POST of ready JSON bytes -- itself, and hands everything else back to the SDK:

* only ``http://`` URLs without a proxy configured for them (TLS, proxies and their
  settings stay the SDK's business, never a second implementation of them);
* it makes exactly one attempt (plus one on a fresh connection when a kept-alive one turns
  out closed by the server, as HTTP clients do) and reports what happened: an answer with its
  status, or :class:`Unanswered`. The caller counts that attempt as the SDK's first and lets
  the SDK make the retries, with its backoff and error mapping (see ``OpenAIModel``);
* reads are bounded (header section, header count, body size) and the whole exchange has
  the caller's timeout; a cancelled or failed exchange closes its connection, so a
  connection is only ever reused after a complete answer.

Why it is kept (issue 42: only if, without it, the per-turn ratio to the fastest peer over
loopback would pass 0.1x). ``benchmarks/swaps_http.py`` ran ``OpenAIModel`` with and without
this path (``_fast = None``: every request through the SDK's ``client.post`` with the ready
body) beside openai-agents, pydantic-ai and LangGraph on one loopback server, 4 interleaved
rounds (load 10-13 on 2 cores; ``benchmarks/results/swaps_http.json``). Without it, Retinue's
ratio to the round's fastest peer is 0.34x wall / 0.26x CPU at 10 turns (over 0.1x in every
round: 0.13-0.94x wall, 0.13-0.32x CPU), 0.23x / 0.21x at 10 turns after 10 messages and
0.10x / 0.07x at 100 turns; with it 0.06x / 0.04x, 0.06x / 0.035x and 0.035x / 0.015x. The
SDK's client costs about 1.9-2.2 ms of CPU per request where this path's whole turn costs
0.3-0.45 ms; against the bare ``http.client`` floor (target 2x) the 100-turn CPU ratio is
7.2x without it and 1.8x with it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

__all__ = ["Answer", "FastPoster", "Unanswered", "fast_path_allowed"]

MAX_HEAD = 64 * 1024  # bytes of status line + headers
MAX_HEADERS = 100
MAX_BODY = 64 * 1024 * 1024


def fast_path_allowed(url: str) -> bool:
    """Plain HTTP with no proxy configured for its host (else the SDK handles everything)."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        return False
    import urllib.request  # (a twentieth of a second: only for a plain-HTTP server)

    proxies = urllib.request.getproxies()
    if not (proxies.get("http") or proxies.get("all")):
        return True
    return bool(urllib.request.proxy_bypass(parts.hostname))


class _Malformed(Exception):
    """The server's answer is not HTTP/1.1 as expected."""


class Unanswered(Exception):
    """No complete answer: refused, reset, timed out or malformed (``__cause__`` says)."""

    def __init__(self, cause: BaseException, *, timed_out: bool) -> None:
        super().__init__(str(cause) or type(cause).__name__)
        self.timed_out = timed_out


@dataclass(frozen=True, slots=True)
class Answer:
    """A complete HTTP answer: its status, body, and what it says about retrying."""

    status: int
    body: bytes
    should_retry: bool | None = None  # ``x-should-retry``, when the server said
    retry_after: float | None = None  # seconds (``retry-after-ms`` / ``retry-after``)


class _Conn(asyncio.Protocol):
    """One kept-alive connection: the answer is parsed as its bytes arrive (no stream
    reader, one wake-up of the waiting task per answer)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.waiter: asyncio.Future[tuple[Answer, bool]] | None = None
        self.buffer = bytearray()
        self.head: tuple[int, int | None, bool, bool, bool | None, float | None] | None = None
        self.body_at = 0
        self.broken = False  # closed, or bytes nobody asked for: never reused
        # the exchange's deadline (loop time), watched by one timer per connection that is
        # moved on only when it fires: a request costs no timer of its own
        self.deadline = 0.0
        self.timer: asyncio.TimerHandle | None = None
        self.timer_at = 0.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.broken = True
        waiter = self.waiter
        if waiter is None or waiter.done():
            return
        if exc is None and self.head is not None and self.head[1] is None and not self.head[2]:
            self._finish(bytes(self.buffer[self.body_at :]), keep=False)  # ends at close
        else:
            waiter.set_exception(exc or EOFError("the server closed the connection"))

    def data_received(self, data: bytes) -> None:
        if self.waiter is None or self.waiter.done():
            self.broken = True  # an answer to nothing
            return
        self.buffer += data
        try:
            self._parse()
        except (ValueError, _Malformed) as exc:
            self.broken = True
            self.waiter.set_exception(exc)

    def exchange(
        self, request: bytes, loop: asyncio.AbstractEventLoop, deadline: float
    ) -> asyncio.Future[tuple[Answer, bool]]:
        """Send ``request``; the future is the answer (and whether to keep the connection),
        or :class:`TimeoutError` once the loop's clock passes ``deadline``."""
        assert self.transport is not None
        self.waiter = loop.create_future()
        self.buffer.clear()
        self.head = None
        self.deadline = deadline
        if self.timer is None or deadline < self.timer_at:
            self._watch(loop, deadline)
        self.transport.write(request)
        return self.waiter

    def _watch(self, loop: asyncio.AbstractEventLoop, at: float) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.timer = loop.call_at(at, self._timer_fired, loop)
        self.timer_at = at

    def _timer_fired(self, loop: asyncio.AbstractEventLoop) -> None:
        self.timer = None
        waiter = self.waiter
        if waiter is None or waiter.done():
            return  # idle: the next exchange starts a timer
        if self.deadline > self.timer_at:  # a later exchange's deadline: watch on
            self._watch(loop, self.deadline)
        else:
            self.broken = True
            waiter.set_exception(TimeoutError())

    def close(self) -> None:
        self.broken = True
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.transport is not None:
            self.transport.close()

    def _parse(self) -> None:
        buf = self.buffer
        if self.head is None:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > MAX_HEAD:
                    raise _Malformed("header section too large")
                return
            self.head = _parse_head(bytes(buf[:end]))
            self.body_at = end + 4
        _, length, chunked, keep, _, _ = self.head
        if chunked:
            done = _chunked(buf, self.body_at)
            if done is not None:
                self._finish(done[0], keep and done[1] == len(buf))
        elif length is not None:
            if len(buf) - self.body_at >= length:
                end = self.body_at + length
                self._finish(bytes(buf[self.body_at : end]), keep and end == len(buf))
        elif len(buf) - self.body_at > MAX_BODY:
            raise _Malformed("body too large")

    def _finish(self, body: bytes, keep: bool) -> None:
        assert self.head is not None and self.waiter is not None
        status, _, _, _, should_retry, retry_after = self.head
        if not keep:
            self.broken = True
        self.waiter.set_result((Answer(status, body, should_retry, retry_after), keep))


def _parse_head(
    head: bytes,
) -> tuple[int, int | None, bool, bool, bool | None, float | None]:
    """Status, content length, chunked, keep-alive, ``x-should-retry``, retry delay."""
    lines = head.lower().split(b"\r\n")
    version, _, rest = lines[0].partition(b" ")
    if not version.startswith(b"http/1.") or len(lines) > MAX_HEADERS + 1:
        raise _Malformed("not an HTTP/1.x answer")
    status = int(rest[:3])
    length: int | None = None
    chunked = False
    keep = version == b"http/1.1"
    should_retry: bool | None = None
    retry_after: float | None = None
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name in _IGNORED:
            continue
        name = name.strip()
        value = value.strip()
        if name == b"content-length":
            length = int(value)
            if not 0 <= length <= MAX_BODY:
                raise _Malformed(f"body of {length} bytes")
        elif name == b"transfer-encoding":
            chunked = value.endswith(b"chunked")
        elif name == b"connection":
            keep = value == b"keep-alive" or (keep and value != b"close")
        elif name == b"x-should-retry":
            should_retry = value == b"true"
        elif name == b"retry-after-ms":
            retry_after = _seconds(value, 1000)
        elif name == b"retry-after" and retry_after is None:
            retry_after = _seconds(value, 1)
    if length is None and not chunked:
        keep = False  # the body ends when the connection does
    return status, length, chunked, keep, should_retry, retry_after


# the headers every answer carries that say nothing here (skipped without a closer look)
_IGNORED = frozenset((b"content-type", b"date", b"server"))


def _chunked(buf: bytearray, at: int) -> tuple[bytes, int] | None:
    """A complete chunked body from ``buf[at:]`` and where it ends; ``None`` if incomplete."""
    parts: list[bytes] = []
    total = 0
    while True:
        eol = buf.find(b"\r\n", at)
        if eol < 0:
            return None
        size = int(bytes(buf[at:eol]).split(b";", 1)[0].strip(), 16)
        at = eol + 2
        if size == 0:
            while True:  # trailers, up to the empty line
                eol = buf.find(b"\r\n", at)
                if eol < 0:
                    return None
                if eol == at:
                    return b"".join(parts), eol + 2
                at = eol + 2
        total += size
        if total > MAX_BODY:
            raise _Malformed("body too large")
        if len(buf) < at + size + 2:
            return None
        if buf[at + size : at + size + 2] != b"\r\n":
            raise _Malformed("bad chunk")
        parts.append(bytes(buf[at : at + size]))
        at += size + 2


class FastPoster:
    """POSTs to one ``http://host:port`` over kept-alive connections (one event loop's)."""

    def __init__(self, url: str, headers: dict[str, str], timeout: float) -> None:
        parts = urlsplit(url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.base_path = parts.path.rstrip("/")
        self.timeout = timeout
        host = self.host if self.port == 80 else f"{self.host}:{self.port}"
        lines = [f"Host: {host}", *(f"{k}: {v}" for k, v in headers.items())]
        self._head = "\r\n".join(lines).encode("latin-1")
        self._idle: list[_Conn] = []
        self._starts: dict[str, bytes] = {}  # per path: the request up to its length

    def _start(self, path: str) -> bytes:
        start = b"POST %s HTTP/1.1\r\n%s\r\nContent-Length: " % (
            (self.base_path + path).encode("latin-1"),
            self._head,
        )
        if len(self._starts) < 16:
            self._starts[path] = start
        return start

    async def post(self, path: str, body: Sequence[bytes | bytearray]) -> Answer:
        """``POST path`` with the ``body`` pieces joined (at once: they may be a buffer the
        caller reuses); the answer whatever its status, or ``Unanswered``."""
        start = self._starts.get(path)
        if start is None:
            start = self._start(path)
        request = b"".join([start, b"%d\r\n\r\n" % sum(map(len, body)), *body])
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        while True:
            conn = self._idle.pop() if self._idle else None
            reused = conn is not None
            if conn is not None and conn.broken:  # closed by the server while it sat idle
                conn.close()
                continue
            try:
                if conn is None:
                    async with asyncio.timeout_at(deadline):
                        _, conn = await loop.create_connection(_Conn, self.host, self.port)
                answer, keep = await conn.exchange(request, loop, deadline)
            except TimeoutError as exc:
                _close(conn)
                raise Unanswered(exc, timed_out=True) from exc
            except (OSError, EOFError, ValueError, _Malformed) as exc:
                _close(conn)
                if reused:  # closed by the server as the request went out: a fresh one
                    continue
                raise Unanswered(exc, timed_out=False) from exc
            except BaseException:  # cancelled: the exchange is unfinished, the connection dead
                _close(conn)
                raise
            if keep and not conn.broken:
                self._idle.append(conn)
            else:
                conn.close()
            return answer

    async def close(self) -> None:
        """Close the idle connections."""
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


def _seconds(value: bytes, per_second: int) -> float | None:
    try:
        return float(value) / per_second
    except ValueError:
        return None  # an HTTP date: the caller's default delay applies


def _close(conn: _Conn | None) -> None:
    if conn is not None:
        conn.close()
