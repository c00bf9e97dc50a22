"""Running one command hook: ``bash -c COMMAND``, confined where its placement says.

The hook reads its event's JSON on stdin and runs in the workspace (``cwd``) with the
environment it is given (see :func:`hook_environment`: the allow-list of the ``Bash`` tool,
``CLAUDE_PROJECT_DIR``, and only the variables the user's own settings pass on; never the
provider keys Retinue itself was started with). Where it runs is its placement
(:mod:`retinue.policy.launch`): inside the ``Bash`` tool's sandbox, or, when the user's own
config trusts it, on the host; either way in a PID namespace of its own, so nothing it starts
(``setsid`` children included) outlives it: not its end, its timeout, a cancellation (which
then propagates), nor Retinue's death. stdout and stderr are kept up to :data:`OUTPUT_LIMIT`
bytes each; the rest is read and dropped, and :class:`Outcome` says how much.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from retinue.config import default_home
from retinue.errors import PolicyError
from retinue.policy.launch import Launch, Placement
from retinue.tools.builtin.sandbox import RulePaths, safe_environment
from retinue.tools.builtin.shell import live_groups

__all__ = ["OUTPUT_LIMIT", "Outcome", "hook_environment", "run_hook_command"]

OUTPUT_LIMIT = 64 * 1024
"""Bytes of a hook's stdout, and of its stderr, that are kept (the rest is dropped)."""
_CHUNK = 16 * 1024


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one hook command ended: its exit code (``None``: killed at its timeout), its
    output (decoded, at most :data:`OUTPUT_LIMIT` bytes each) and the bytes dropped."""

    code: int | None
    stdout: str
    stderr: str
    dropped_stdout: int = 0
    dropped_stderr: int = 0
    error: str = ""  # it could not be started at all


def hook_environment(
    workspace: Path, passed: Mapping[str, str], environ: Mapping[str, str] = os.environ
) -> dict[str, str]:
    """A hook's environment: the ``Bash`` tool's allow-list taken from ``environ``, then
    ``passed`` (what the user's own settings name), then ``CLAUDE_PROJECT_DIR``."""
    env = safe_environment(environ)
    env.update(passed)
    env["CLAUDE_PROJECT_DIR"] = str(workspace)
    return env


class _Bounded:
    """Reads a pipe to its end, keeping the first ``limit`` bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.kept = bytearray()
        self.dropped = 0

    async def drain(self, stream: asyncio.StreamReader | None) -> None:
        if stream is None:
            return
        while chunk := await stream.read(_CHUNK):
            room = self.limit - len(self.kept)
            if room > 0:
                self.kept += chunk[:room]
            self.dropped += max(0, len(chunk) - max(room, 0))

    def text(self) -> str:
        return self.kept.decode("utf-8", errors="replace")


async def _feed(stdin: asyncio.StreamWriter | None, data: bytes) -> None:
    """Write the event to the hook's stdin and close it (a hook that does not read it, or
    exits early, is not an error)."""
    if stdin is None:
        return
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        stdin.write(data)
        await stdin.drain()
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        stdin.close()


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


async def run_hook_command(
    command: str,
    stdin: bytes,
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,  # noqa: ASYNC109 (a hook's own setting, in seconds)
    limit: int = OUTPUT_LIMIT,
    placement: Placement = "own",
    data_dir: Path | None = None,
    mounts: RulePaths | None = None,
) -> Outcome:
    """Run ``bash -c command`` where ``placement`` says: in the sandbox of the workspace
    ``cwd`` (``data_dir``, default the data directory, hidden), or outside it (see the
    module text)."""
    launch = Launch(cwd, data_dir or default_home(), mounts=mounts)
    try:
        started = launch.start(["bash", "-c", command], placement)
    except PolicyError as exc:
        return Outcome(None, "", "", error=f"was not started: {exc}")
    try:
        return await _run(started.argv, stdin, cwd=cwd, env=env, timeout=timeout, limit=limit)
    finally:
        started.release()


async def _run(
    argv: list[str],
    stdin: bytes,
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout: float,  # noqa: ASYNC109
    limit: int,
) -> Outcome:
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        return Outcome(None, "", "", error=f"could not start: {exc.strerror or exc}")
    live_groups.add(proc.pid)  # killed if Retinue exits meanwhile
    out, err = _Bounded(limit), _Bounded(limit)
    code: int | None = None
    try:
        async with asyncio.timeout(timeout):
            await asyncio.gather(
                _feed(proc.stdin, stdin), out.drain(proc.stdout), err.drain(proc.stderr)
            )
            code = await proc.wait()
    except TimeoutError:
        code = None
    finally:
        if code is None:  # timed out, cancelled or failed: nothing it started stays
            _kill_group(proc.pid)
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await asyncio.shield(proc.wait())
        live_groups.discard(proc.pid)
    return Outcome(code, out.text(), err.text(), out.dropped, err.dropped)
