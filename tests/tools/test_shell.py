"""Bash through the registry: output, exit codes, cap, timeout and cancellation kills."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from retinue.messages import ToolCall, ToolResultMessage
from retinue.tools import ToolContext, ToolRegistry
from retinue.tools.builtin.sandbox import bwrap_problem
from retinue.tools.builtin.shell import OUTPUT_LIMIT, CappedOutput, run_command

Call = Callable[..., Awaitable[ToolResultMessage]]


def _gone(pid: int) -> bool:
    """The process no longer runs (absent, or a zombie waiting for a reaper)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in {"Z", "X"}


def _has_pid(path: Path) -> bool:
    return path.exists() and path.read_text().strip().isdigit()


def _pids_running(*argv: str) -> list[int]:
    """Host pids of live processes running exactly ``argv`` (a sandboxed command sees its
    own PID namespace, so its ``$$`` and ``$!`` are no use outside it)."""
    wanted = "\0".join(argv).encode() + b"\0"
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if cmdline == wanted and not _gone(int(entry.name)):
            found.append(int(entry.name))
    return found


# Waits poll and return as soon as their condition holds: their bound only ends a hang, so
# it is generous (a loaded machine starts a Python process in seconds, not milliseconds).
# A command that must be killed sleeps for longer than the wait for it to be gone.
WAIT_S = 60.0
STRAY_S = 300  # how long the `sleep` commands that must be killed would otherwise run


async def _wait_for(predicate: Callable[[], bool], seconds: float = WAIT_S) -> bool:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


@pytest.fixture
def real_ws(ws: Path) -> str:
    return os.path.realpath(ws)


async def test_runs_in_the_workspace_and_captures_both_streams(call: Call, real_ws: str) -> None:
    result = await call("Bash", command="pwd; echo out; echo err >&2", description="where am I")
    assert not result.is_error
    lines = result.content.splitlines()
    assert lines[0] == real_ws
    assert "out" in lines
    assert "err" in lines
    assert lines[-1] == "(exit code 0)"


async def test_non_zero_exit_is_an_error_with_the_output(call: Call) -> None:
    result = await call("Bash", command="echo partial; exit 3")
    assert result.is_error
    assert "exit code 3" in result.content
    assert "partial" in result.content


async def test_output_is_capped_keeping_head_and_tail(call: Call) -> None:
    flood = "head -c 200000 /dev/zero | tr '\\0' a"
    result = await call("Bash", command=f"echo HEAD_MARK; {flood}; echo; echo TAIL_MARK")
    assert not result.is_error
    assert len(result.content) < OUTPUT_LIMIT + 200
    assert result.content.startswith("HEAD_MARK")
    assert "TAIL_MARK" in result.content[-100:]
    assert "bytes of output omitted" in result.content


def test_capped_output_keeps_short_output_whole() -> None:
    sink = CappedOutput(10)
    for piece in (b"abc", b"defgh", b"ij"):
        sink.feed(piece)
    assert sink.text() == "abcdefghij"
    sink.feed(b"KLMNO")
    text = sink.text()
    assert text.startswith("abcde")
    assert text.endswith("KLMNO")
    assert "5 bytes of output omitted" in text


async def test_timeout_kills_the_command_and_its_children(call: Call, ws: Path) -> None:
    # 2 s for the shell to start and echo (a loaded machine is slow to fork); its sleep is
    # killed, not waited for
    command = f"echo started; sleep {STRAY_S}.619; touch late.txt"
    result = await call("Bash", command=command, timeout=2000)
    assert result.is_error
    assert "timed out after 2000 ms" in result.content
    assert "started" in result.content
    assert await _wait_for(lambda: _pids_running("sleep", f"{STRAY_S}.619") == [])
    assert not (ws / "late.txt").exists()


async def test_background_jobs_do_not_outlive_the_call(call: Call, ws: Path) -> None:
    result = await call("Bash", command="(sleep 0.4; touch late.txt) & echo quick")
    assert not result.is_error
    assert "quick" in result.content
    await asyncio.sleep(0.7)
    assert not (ws / "late.txt").exists()


async def test_cancellation_kills_the_process_group_and_propagates(
    registry: ToolRegistry, ctx: ToolContext, ws: Path
) -> None:
    command = f"sleep {STRAY_S}.417 & echo $! > child.pid; wait"
    call = ToolCall("c1", "Bash", json.dumps({"command": command, "timeout": 20_000}))
    task = asyncio.create_task(registry.execute(call, ctx))
    assert await _wait_for(lambda: _has_pid(ws / "child.pid"))
    # $! is known once bash has forked, before the child has become `sleep` (exec)
    assert await _wait_for(lambda: len(_pids_running("sleep", f"{STRAY_S}.417")) == 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, WAIT_S)
    assert await _wait_for(lambda: _pids_running("sleep", f"{STRAY_S}.417") == [])


async def test_a_cancellation_as_the_command_starts_still_kills_what_it_started(
    ws: Path,
) -> None:
    """Cancelled while its pipes are being connected (the shell already running), asyncio
    alone would kill the shell and leave its children: 20 tries at that moment."""
    for i in range(20):
        pid_file = ws / f"child{i}.pid"
        command = f"sleep {STRAY_S + 1}.{i}3 & echo $! > {pid_file.name}; wait"
        task = asyncio.create_task(run_command(command, str(ws), 20))
        assert await _wait_for(lambda f=pid_file: _has_pid(f))  # polls each 20 ms
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        gone = await _wait_for(lambda i=i: _pids_running("sleep", f"{STRAY_S + 1}.{i}3") == [])
        assert gone, i


async def test_timeout_argument_is_validated(call: Call) -> None:
    result = await call("Bash", command="true", timeout=600_001)
    assert result.is_error
    assert "timeout" in result.content


_AGENT = """
import asyncio, sys
from pathlib import Path
from retinue.tools.builtin.sandbox import Sandbox
from retinue.tools.builtin.shell import run_command
ws, sandboxed, tag = sys.argv[1:]
box = Sandbox.for_workspace(Path(ws), Path(ws) / "data") if sandboxed == "1" else None
command = f"sleep 302.{tag} & sleep 302.{tag} & wait"  # STRAY_S + 2
asyncio.run(run_command(command, ws, 60, sandbox=box))
"""


def _catches(pid: int, signum: int) -> bool:
    """The process ``pid`` has a handler for ``signum`` (its ``SigCgt`` mask in /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    return False


def _until(predicate: Callable[[], bool], seconds: float = WAIT_S) -> bool:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@pytest.mark.timeout(4 * WAIT_S)  # a Python process started under load, then its children
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
@pytest.mark.parametrize("sandboxed", [False, True])
def test_commands_die_when_the_agent_is_terminated_or_hung_up(
    ws: Path, signum: int, sandboxed: bool
) -> None:
    if sandboxed and bwrap_problem() is not None:
        pytest.skip(f"no sandbox: {bwrap_problem()}")
    tag = f"{int(signum)}{int(sandboxed)}7"
    agent = subprocess.Popen([sys.executable, "-c", _AGENT, str(ws), str(int(sandboxed)), tag])
    try:
        assert _until(lambda: len(_pids_running("sleep", f"302.{tag}")) == 2)
        # the agent registers its command's group and handles the signal just after the
        # spawn returns, which a loaded machine can delay past the sleeps' start
        assert _until(lambda: _catches(agent.pid, signum))
        agent.send_signal(signum)
        assert agent.wait(timeout=WAIT_S) == -signum
    finally:
        agent.kill()
    assert _until(lambda: _pids_running("sleep", f"302.{tag}") == [])
