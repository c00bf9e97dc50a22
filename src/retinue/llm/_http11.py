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
"""

from __future__ import annotations

import asyncio
import contextlib
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


_Conn = tuple[asyncio.StreamReader, asyncio.StreamWriter]


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

    async def post(self, path: str, body: bytes) -> Answer:
        """``POST path`` with ``body``; the answer whatever its status, or ``Unanswered``."""
        head = b"POST %s HTTP/1.1\r\n%s\r\nContent-Length: %d\r\n\r\n" % (
            (self.base_path + path).encode("latin-1"),
            self._head,
            len(body),
        )
        while True:
            reused = bool(self._idle)
            conn = self._idle.pop() if reused else None
            try:
                async with asyncio.timeout(self.timeout):
                    if conn is None:
                        conn = await asyncio.open_connection(self.host, self.port, limit=MAX_HEAD)
                    answer, keep = await self._exchange(conn, head + body)
            except TimeoutError as exc:
                _close(conn)
                raise Unanswered(exc, timed_out=True) from exc
            except (OSError, EOFError, asyncio.LimitOverrunError, ValueError, _Malformed) as exc:
                _close(conn)
                if reused:  # closed by the server while it sat idle: a fresh one
                    continue
                raise Unanswered(exc, timed_out=False) from exc
            except BaseException:  # cancelled: the exchange is unfinished, the connection dead
                _close(conn)
                raise
            if keep:
                self._idle.append(conn)
            else:
                _close(conn)
            return answer

    async def _exchange(self, conn: _Conn, request: bytes) -> tuple[Answer, bool]:
        reader, writer = conn
        writer.write(request)
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")  # bounded by the reader's limit
        lines = head.split(b"\r\n")
        version, _, rest = lines[0].partition(b" ")
        if not version.startswith(b"HTTP/1.") or len(lines) > MAX_HEADERS + 3:
            raise _Malformed("not an HTTP/1.x answer")
        status = int(rest[:3])
        length: int | None = None
        chunked = False
        keep = version == b"HTTP/1.1"
        should_retry: bool | None = None
        retry_after: float | None = None
        for line in lines[1:-2]:
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            value = value.strip().lower()
            if name == b"content-length":
                length = int(value)
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
        if chunked:
            data = await _read_chunked(reader)
        elif length is not None:
            if not 0 <= length <= MAX_BODY:
                raise _Malformed(f"body of {length} bytes")
            data = await reader.readexactly(length)
        else:  # delimited by the end of the connection
            data = await reader.read(MAX_BODY + 1)
            if len(data) > MAX_BODY:
                raise _Malformed("body too large")
            keep = False
        return Answer(status, data, should_retry, retry_after), keep

    async def close(self) -> None:
        """Close the idle connections."""
        idle, self._idle = self._idle, []
        for conn in idle:
            _close(conn)


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    total = 0
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";", 1)[0].strip(), 16)
        if size == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers
                pass
            return b"".join(parts)
        total += size
        if total > MAX_BODY:
            raise _Malformed("body too large")
        parts.append(await reader.readexactly(size))
        if await reader.readexactly(2) != b"\r\n":
            raise _Malformed("bad chunk")


def _seconds(value: bytes, per_second: int) -> float | None:
    try:
        return float(value) / per_second
    except ValueError:
        return None  # an HTTP date: the caller's default delay applies


def _close(conn: _Conn | None) -> None:
    if conn is not None:
        with contextlib.suppress(Exception):
            conn[1].close()
