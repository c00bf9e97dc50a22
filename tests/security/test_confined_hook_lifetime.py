"""Issue 38, section 7: a hook is killed with everything it started.

A hook that leaves ``setsid sleep ... &`` behind (a new session, so no process group holds
it) must leave no process on the machine once the hook has ended, timed out or been
cancelled, nor once Retinue itself was killed with SIGKILL. Each hook is the user's own
(config.toml ``[hooks]``), once confined (the default) and once trusted to run outside the
sandbox: both run in a PID namespace of their own, and a namespace dies with its first
process. Real processes, real bubblewrap; processes are found on the host by a token in
their command line.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.policy.hooks import Hooks, load_hooks
from retinue.testing import ScriptedModel
from retinue.tools.builtin.sandbox import bwrap_problem

pytestmark = [
    pytest.mark.timeout(300),  # a hang bound
    pytest.mark.skipif(bwrap_problem() is not None, reason=f"no sandbox here: {bwrap_problem()}"),
]

WHERE = [pytest.param(False, id="confined"), pytest.param(True, id="trusted-outside")]


def token() -> str:
    """A sleep length no other process on the machine has in its command line."""
    return f"1000.{uuid.uuid4().int % 10**9:09d}"


def running(tok: str) -> list[int]:
    """Host PIDs of live processes whose command line holds ``sleep <tok>``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if tok.encode() in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


async def gone(tok: str) -> bool:
    """Whether the token's processes are gone (a kill is delivered asynchronously; this
    bounds the wait for it, it times nothing)."""
    for _ in range(3000):  # (60 s and more: a hang bound)
        if not running(tok):
            return True
        await asyncio.sleep(0.02)
    return _reaped(tok)


def _reaped(tok: str) -> bool:
    """Kill what is left of the token's processes (nothing stays behind, whatever the test
    says); ``False``, for the assertion."""
    for pid in running(tok):
        os.kill(pid, signal.SIGKILL)
    return False


def config(event: str, command: str, outside: bool, timeout: float = 60) -> dict[str, Any]:
    hook = {"type": "command", "command": command, "timeout": timeout}
    return {event: [{"hooks": [hook]}]}


def hooks(ws: Path, data: Path, section: dict[str, Any], outside: bool) -> Hooks:
    if outside:
        return load_hooks(ws, data, config=section, trusted_outside=("hooks",))
    return load_hooks(ws, data, config=section)


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    ws, data = tmp_path / "ws", tmp_path / "data"
    ws.mkdir()
    data.mkdir()
    return ws, data


@pytest.mark.parametrize("outside", WHERE)
async def test_a_setsid_child_dies_when_its_hook_ends(
    dirs: tuple[Path, Path], outside: bool
) -> None:
    ws, data = dirs
    tok = token()
    command = f"setsid sleep {tok} > /dev/null 2>&1 < /dev/null & echo started"
    loaded = hooks(ws, data, config("PostToolUse", command, outside), outside)
    result = await loaded.run("PostToolUse", {"cwd": str(ws)})
    assert result.problems == ()
    assert await gone(tok), "the hook's setsid child outlived it"


@pytest.mark.parametrize("outside", WHERE)
async def test_a_setsid_child_dies_when_its_hook_times_out(
    dirs: tuple[Path, Path], outside: bool
) -> None:
    ws, data = dirs
    tok = token()
    command = f"setsid sleep {tok} > /dev/null 2>&1 < /dev/null & sleep 60"
    loaded = hooks(ws, data, config("PreToolUse", command, outside, timeout=1), outside)
    result = await loaded.run("PreToolUse", {"cwd": str(ws)})
    assert any("timed out after 1 s and was killed" in p for p in result.problems)
    assert await gone(tok), "the hook's setsid child outlived its timeout"


@pytest.mark.parametrize("outside", WHERE)
async def test_a_setsid_child_dies_when_its_hook_is_cancelled(
    dirs: tuple[Path, Path], outside: bool
) -> None:
    ws, data = dirs
    tok = token()
    command = f"setsid sleep {tok} > /dev/null 2>&1 < /dev/null & echo go > started; sleep 60"
    loaded = hooks(ws, data, config("PreToolUse", command, outside), outside)
    task = asyncio.create_task(loaded.run("PreToolUse", {"cwd": str(ws)}))
    for _ in range(3000):  # bounds a hang (60 s and more: a sandbox starts slowly under load)
        if running(tok) and (ws / "started").exists():
            break
        await asyncio.sleep(0.02)
    assert running(tok), "the hook never started its child: the test proves nothing"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await gone(tok), "the hook's setsid child outlived the cancellation"


@pytest.mark.parametrize("outside", WHERE)
def test_a_setsid_child_dies_when_retinue_is_killed(tmp_path: Path, outside: bool) -> None:
    ws, data = tmp_path / "ws", tmp_path / "data"
    ws.mkdir()
    data.mkdir()
    tok = token()
    command = f"setsid sleep {tok} > /dev/null 2>&1 < /dev/null & sleep 600"
    lines = ['[sandbox]\ntrusted_outside = ["hooks"]\n\n'] if outside else []
    lines.append(f"[[hooks.UserPromptSubmit]]\nhooks = [{{ command = {command!r} }}]\n")
    (data / "config.toml").write_text("".join(lines))
    with LoopbackOpenAIServer(ScriptedModel(["never asked"])) as loop:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RETINUE_"))}
        env.update(RETINUE_HOME=str(data), RETINUE_BLOCK_REAL_MODELS="1",
                   OPENAI_BASE_URL=loop.base_url, OPENAI_API_KEY="sk-canary")  # fmt: skip
        proc = subprocess.Popen([sys.executable, "-m", "retinue", "run", "--model", "openai:m",
                                 "hi"], cwd=ws, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        try:
            deadline = time.monotonic() + 60  # bounds a hang
            while not running(tok):
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline, "the hook never started its child"
                time.sleep(0.05)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)
    for _ in range(3000):  # bounds the wait for the kernel's kill, times nothing
        if not running(tok):
            break
        time.sleep(0.02)
    assert not running(tok) or _reaped(tok), "the hook's setsid child outlived Retinue"
