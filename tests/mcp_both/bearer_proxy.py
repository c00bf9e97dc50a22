"""A loopback HTTP proxy that adds ``Authorization: Bearer <token>`` to every request it
forwards, for an MCP client that cannot send a header (the official conformance suite):
the server under test keeps its authentication exactly as a user meets it, and the client
reaches it as a token holder would.

Everything else goes through as sent, ``Host`` and ``Origin`` included (the suite's DNS
rebinding checks send foreign ones and expect the server's refusal), and responses stream
back as they come (SSE).

With ``token=None`` it adds nothing (the client's own ``Authorization`` goes through), and
with a ``seen`` list it records each request as the server receives it (:class:`Seen`): a
test's view of the wire from the server's side."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from typing import Any

import httpx
import uvicorn

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "upgrade", "content-length",
              "proxy-connection", "trailer"}  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class Seen:
    """One forwarded request: its method, path, headers (names lower-cased) and body."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class BearerProxy:
    """An ASGI app forwarding to ``upstream`` (scheme://host:port) with the bearer token."""

    def __init__(self, upstream: str, token: str | None, seen: list[Seen] | None = None) -> None:
        self.upstream = upstream
        self.token = token
        self.seen = seen
        self.client = httpx.AsyncClient(timeout=httpx.Timeout(120.0))

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        dropped = HOP_BY_HOP | ({"authorization"} if self.token is not None else set())
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]
                   if k.decode("latin-1").lower() not in dropped]  # fmt: skip
        if self.token is not None:
            headers.append(("authorization", f"Bearer {self.token}"))
        path = scope["raw_path"].decode("latin-1") or scope["path"]
        if scope["query_string"]:
            path += "?" + scope["query_string"].decode("latin-1")
        if self.seen is not None:
            named = {k.lower(): v for k, v in headers}
            self.seen.append(Seen(scope["method"], path, named, body))
        request = self.client.build_request(
            scope["method"], self.upstream + path, headers=headers, content=body
        )
        response = await self.client.send(request, stream=True)
        relay = asyncio.create_task(self._relay(response, send))
        gone = asyncio.create_task(_disconnected(receive))
        try:  # a client that hangs up ends the upstream stream too (an SSE stream never ends)
            await asyncio.wait({relay, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (relay, gone):
                task.cancel()
            await asyncio.gather(relay, gone, return_exceptions=True)
            await response.aclose()

    @staticmethod
    async def _relay(response: httpx.Response, send: Any) -> None:
        await send({
            "type": "http.response.start",
            "status": response.status_code,
            "headers": [(k.encode("latin-1"), v.encode("latin-1"))
                        for k, v in response.headers.multi_items()
                        if k.lower() not in HOP_BY_HOP],
        })  # fmt: skip
        async for chunk in response.aiter_raw():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _disconnected(receive: Any) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


@asynccontextmanager
async def bearer_proxy(
    upstream: str, token: str | None, seen: list[Seen] | None = None
) -> AsyncIterator[str]:
    """Serve a :class:`BearerProxy` to ``upstream`` on a loopback port; yields its base URL."""
    port = free_port()
    proxy = BearerProxy(upstream, token, seen)
    config = uvicorn.Config(proxy, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = server.force_exit = True
        with suppress(asyncio.CancelledError):
            await asyncio.wait_for(task, 10)
        await proxy.client.aclose()
