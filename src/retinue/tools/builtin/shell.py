"""The ``Bash`` tool, named and shaped as Claude Code's.

A command runs as ``bash -c`` in the workspace directory, inside the bubblewrap sandbox of
:mod:`retinue.tools.builtin.sandbox` (workspace writable, the rest read-only, secrets and the
data directory hidden, no network), in a process group of its own (a new session), with
stdin closed, stdout + stderr captured together and only an allow-listed environment. The
output kept is bounded: past :data:`OUTPUT_LIMIT` characters only its head and tail survive,
joined by a marker saying how much was dropped. On timeout, on cancellation, and when the command
returns, the whole process group is killed, so nothing it started in the background (``&``)
outlives the call; in the sandbox even a process that left the group (``setsid``) dies with
it, since the sandbox's PID namespace ends with it. When Retinue itself exits, groups still
running are killed; in the sandbox, ``--die-with-parent`` does it even after a SIGKILL.
Cancellation (:class:`asyncio.CancelledError`) propagates once the group is gone.

Where bubblewrap is missing or cannot run, the first command's result says so once and
commands run unsandboxed (with the allow-listed environment still): then a command can
reach any path the user running Retinue can.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import signal
import subprocess
import threading
from dataclasses import replace
from pathlib import Path
from typing import Annotated

from pydantic import Field

from retinue.errors import ToolError
from retinue.tools.base import Tool, ToolContext, tool
from retinue.tools.builtin.sandbox import RuleMounts, Sandbox, bwrap_problem, safe_environment
from retinue.tools.builtin.workspace import workspace_root

__all__ = [
    "DEFAULT_TIMEOUT_MS",
    "MAX_TIMEOUT_MS",
    "OUTPUT_LIMIT",
    "CappedOutput",
    "bash_tool",
    "live_groups",
    "run_command",
    "shell_tools",
]

DEFAULT_TIMEOUT_MS = 120_000
MAX_TIMEOUT_MS = 600_000
OUTPUT_LIMIT = 30_000
"""Bytes of output ``Bash`` keeps at most (the head and tail of longer output)."""
_DRAIN_GRACE_S = 2.0

log = logging.getLogger("retinue.tools.shell")

live_groups: set[int] = set()
"""Process groups of commands still running (killed when the interpreter exits)."""
_told: set[str] = set()  # the reasons for running unsandboxed already told to a model


class CappedOutput:
    """Collects a byte stream, keeping only its first and last ``limit // 2`` bytes."""

    def __init__(self, limit: int = OUTPUT_LIMIT) -> None:
        self._half = max(limit // 2, 1)
        self._head = bytearray()
        self._tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self._half - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if data:
            self._tail += data
            if len(self._tail) > 2 * self._half:
                del self._tail[: len(self._tail) - self._half]

    def text(self) -> str:
        head = self._head.decode("utf-8", errors="replace")
        tail_bytes = bytes(self._tail[-self._half :])
        tail = tail_bytes.decode("utf-8", errors="replace")
        dropped = self.total - len(self._head) - len(tail_bytes)
        if dropped <= 0:
            return head + tail
        return f"{head}\n\n... [{dropped} bytes of output omitted] ...\n\n{tail}"


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


@atexit.register
def _kill_live_groups() -> None:
    for pid in list(live_groups):
        _kill_group(pid)


def _die_by(signum: int, _frame: object) -> None:
    """SIGTERM/SIGHUP with their default action: kill the live groups, then die by it."""
    _kill_live_groups()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _kill_groups_on_signals() -> None:
    """Where SIGTERM and SIGHUP would kill the process outright, kill the groups first (a
    program that handles them itself, as uvicorn does, ends its commands on its own)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) is signal.SIG_DFL:
            signal.signal(signum, _die_by)


class _Collector(asyncio.SubprocessProtocol):
    """Feeds the output into a :class:`CappedOutput`; tells when the shell exits and when
    the pipe closes (later, if a background job still holds it)."""

    def __init__(self, sink: CappedOutput, loop: asyncio.AbstractEventLoop) -> None:
        self.sink = sink
        self.exited: asyncio.Future[None] = loop.create_future()
        self.closed: asyncio.Future[None] = loop.create_future()

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        self.sink.feed(data.encode() if isinstance(data, str) else data)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


async def run_command(
    command: str,
    cwd: str,
    timeout_s: float,
    limit: int = OUTPUT_LIMIT,
    *,
    sandbox: Sandbox | None = None,
) -> tuple[int | None, str]:
    """Run ``bash -c command`` in ``cwd``: (exit code, or ``None`` on timeout; the output).

    With ``sandbox`` the command runs inside it. The environment is always the allow-listed
    one. The process group is killed when the shell exits, on timeout, and on cancellation.
    """
    loop = asyncio.get_running_loop()
    sink = CappedOutput(limit)
    argv = sandbox.argv(command) if sandbox else ["bash", "-c", command]
    spawn = asyncio.ensure_future(
        loop.subprocess_exec(
            lambda: _Collector(sink, loop),
            *argv,
            cwd=cwd,
            env=safe_environment(os.environ),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    )
    try:
        # Shielded: the command runs before its pipes are connected, and a cancellation
        # there would have asyncio kill the shell alone, leaving what it started running.
        transport, proto = await asyncio.shield(spawn)
    except BaseException:
        if not spawn.cancelled() and (not spawn.done() or spawn.exception() is None):
            with contextlib.suppress(BaseException):
                started, _ = await spawn  # moments: the pipes are being connected
                _kill_group(started.get_pid())
                started.close()
        if sandbox is not None:
            sandbox.release()
        raise
    pid = transport.get_pid()
    live_groups.add(pid)
    _kill_groups_on_signals()
    code: int | None = None
    try:
        async with asyncio.timeout(timeout_s):
            await asyncio.shield(proto.exited)
        code = transport.get_returncode()
    except TimeoutError:
        code = None
    finally:
        _kill_group(pid)
        live_groups.discard(pid)
        # The pipe closes once every process holding it is dead; one that left the group
        # (setsid) may keep it open, so wait only briefly.
        await asyncio.wait({proto.exited, proto.closed}, timeout=_DRAIN_GRACE_S)
        transport.close()
        if sandbox is not None:
            sandbox.release()  # the read-only mounts' placeholders, once no command runs
    return code, sink.text()


@tool("Bash")
async def bash_tool(
    ctx: ToolContext,
    command: Annotated[str, Field(description="The shell command to run (bash)")],
    timeout: Annotated[  # noqa: ASYNC109 (Claude Code's name for it; milliseconds)
        int | None,
        Field(
            ge=1,
            le=MAX_TIMEOUT_MS,
            description=f"Timeout in milliseconds (default {DEFAULT_TIMEOUT_MS}, "
            f"max {MAX_TIMEOUT_MS})",
        ),
    ] = None,
    description: Annotated[
        str | None,
        Field(description="A short description of what the command does (5-10 words)"),
    ] = None,
) -> str:
    """Run a bash command in the workspace directory and return its output.

    stdout and stderr are returned together, followed by the exit code; a non-zero exit code
    makes the result an error. Output beyond 30000 characters is cut in the middle. The
    command is killed (with everything it started) when the timeout passes. There is no
    stdin: interactive commands will not work.
    """
    del description  # for the model's and the user's benefit only
    timeout_ms = timeout or DEFAULT_TIMEOUT_MS
    cwd = workspace_root(ctx)
    if not cwd.is_dir():
        raise ToolError(f"the workspace {cwd} is not a directory")
    sandbox, note = await _sandbox_for(cwd, ctx)
    code, output = await run_command(
        command, str(cwd), timeout_ms / 1000, OUTPUT_LIMIT, sandbox=sandbox
    )
    body = note + (output.rstrip("\n") or "(no output)")
    if code is None:
        raise ToolError(f"command timed out after {timeout_ms} ms and was killed\n{body}")
    if code != 0:
        raise ToolError(f"exit code {_describe(code)}\n{body}")
    return f"{body}\n(exit code 0)"


async def _sandbox_for(cwd: Path, ctx: ToolContext) -> tuple[Sandbox | None, str]:
    """The sandbox for a command, or ``None`` and (the first time only) a note saying why."""
    sandbox = Sandbox.for_workspace(cwd, ctx.data_dir)
    problem = await asyncio.to_thread(bwrap_problem, sandbox.bwrap)  # runs bwrap once
    if problem is None:
        return await _with_rules(sandbox, ctx), ""
    if problem in _told:
        return None, ""
    _told.add(problem)
    log.warning("Bash runs unsandboxed: %s", problem)
    return None, f"[note: no sandbox: {problem}; commands run unsandboxed]\n"


async def _with_rules(sandbox: Sandbox, ctx: ToolContext) -> Sandbox:
    """``sandbox`` with the paths the gate's deny rules keep from commands mounted away."""
    gate = ctx.gate
    if not isinstance(gate, RuleMounts):
        return sandbox
    found = await asyncio.to_thread(gate.sandbox_paths, sandbox.workspace)
    if not found.complete:
        raise ToolError(
            "the workspace holds too many files to find every path a Read or Edit deny rule "
            "names, so the sandbox cannot keep those rules; the command was not run"
        )
    hidden, read_only = (*sandbox.denied, *found.hidden), (*sandbox.read_only, *found.read_only)
    return replace(sandbox, denied=hidden, read_only=read_only)


def _describe(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"{code} (killed by {signal.Signals(-code).name})"
    return str(code)


def shell_tools() -> list[Tool]:
    """``Bash``."""
    return [bash_tool]
