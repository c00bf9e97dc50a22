"""Test helpers: a real uvicorn server in a thread, and polling with a deadline."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import httpx
import uvicorn

from retinue.runtime import Runtime
from retinue.server import create_app

__all__ = ["Serve", "ServerThread", "wait_for"]


class ServerThread:
    """uvicorn serving ``create_app(runtime)`` on a free port until :meth:`stop`."""

    def __init__(self, runtime: Runtime) -> None:
        config = uvicorn.Config(
            create_app(runtime), host="127.0.0.1", port=0, log_level="warning", lifespan="on"
        )
        self.runtime = runtime
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self) -> ServerThread:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        return self

    @property
    def url(self) -> str:
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=20)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)


Serve = Callable[..., ServerThread]


def wait_for(condition: Callable[[], bool], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.02)
