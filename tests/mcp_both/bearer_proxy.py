"""A loopback HTTP proxy that adds ``Authorization: Bearer <token>`` to every request it
forwards, for an MCP client that cannot send a header (the official conformance suite):
the server under test keeps its authentication exactly as a user meets it, and the client
reaches it as a token holder would.

Everything else goes through as sent, ``Host`` and ``Origin`` included (the suite's DNS
rebinding checks send foreign ones and expect the server's refusal), and responses stream
back as they come (SSE)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any

import httpx
import uvicorn

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "upgrade", "content-length",
              "proxy-connection", "trailer"}  # fmt: skip


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class BearerProxy:
    """An ASGI app forwarding to ``upstream`` (scheme://host:port) with the bearer token."""

    def __init__(self, upstream: str, token: str) -> None:
        self.upstream = upstream
        self.token = token
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
        dropped = HOP_BY_HOP | {"authorization"}
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]
                   if k.decode("latin-1").lower() not in dropped]  # fmt: skip
        headers.append(("authorization", f"Bearer {self.token}"))
        path = scope["raw_path"].decode("latin-1") or scope["path"]
        if scope["query_string"]:
            path += "?" + scope["query_string"].decode("latin-1")
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
async def bearer_proxy(upstream: str, token: str) -> AsyncIterator[str]:
    """Serve a :class:`BearerProxy` to ``upstream`` on a loopback port; yields its base URL."""
    port = free_port()
    proxy = BearerProxy(upstream, token)
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
