"""Test helpers: a real uvicorn server in a thread, polling with a deadline, and a streamed
answer's server-sent events."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import uvicorn

from heldmodel import HeldModel
from retinue.runtime import Runtime
from retinue.server import create_app
from retinue.server.conversations import Limits
from retinue.server.security import Security, ensure_token
from retinue.server.tokens import TokenBook

__all__ = ["WAIT_S", "HeldModel", "Serve", "ServerThread", "sse_events", "wait_for"]

WAIT_S = 60.0
"""How long a test waits for a server to start or a condition to hold: polled, so it costs
nothing on a quick machine; it only ends a hang, and a loaded machine is slow."""


class ServerThread:
    """uvicorn serving ``create_app(runtime)`` on a free port until :meth:`stop`.

    Its token is the runtime's data directory's (created as ``retinue serve`` creates it);
    :meth:`client` sends it. :meth:`issue` makes a named token (a tenant) the server takes.
    """

    def __init__(
        self, runtime: Runtime, limits: Limits | None = None, *, cors: tuple[str, ...] = ()
    ) -> None:
        self.token = ensure_token(runtime.settings.home)[0]
        self.tokens = TokenBook(runtime.settings.home)
        security = Security.build(self.token, cors_origins=cors, tokens=self.tokens)
        config = uvicorn.Config(
            create_app(runtime, security, limits),
            host="127.0.0.1",
            port=0,
            log_level="warning",
            lifespan="on",
        )
        self.runtime = runtime
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + WAIT_S
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        return self

    @property
    def url(self) -> str:
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def client(self, *, token: bool | str = True) -> httpx.Client:
        """A client sending the service's token (``token=True``), none, or the one given."""
        bearer = self.token if token is True else token or None
        headers = {"Authorization": f"Bearer {bearer}"} if bearer else {}
        return httpx.Client(base_url=self.url, timeout=WAIT_S, headers=headers)

    def issue(self, name: str, tenant: str | None = None) -> str:
        """A new named token (as ``retinue token issue NAME --tenant T`` makes one)."""
        return self.tokens.issue(name, tenant)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)


Serve = Callable[..., ServerThread]


def wait_for(condition: Callable[[], bool], timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.02)


def sse_events(text: str) -> list[tuple[str, dict[str, Any]]]:
    """A streamed answer's ``(event, data)`` pairs, in order."""
    out = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        out.append((lines["event"], json.loads(lines["data"])))
    return out
