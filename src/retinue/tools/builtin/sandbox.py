"""The OS sandbox of the ``Bash`` tool: bubblewrap, as Claude Code uses it on Linux.

A sandboxed command runs as ``bwrap ... -- bash -c COMMAND`` with

- the whole filesystem mounted read-only, a fresh ``/dev``, ``/proc``, ``/tmp`` and
  ``/run`` (whose sockets, such as ``docker.sock``, would otherwise be reachable);
- the workspace mounted read-write at its own path, except what decides what Retinue,
  Claude Code or git will run later, outside the sandbox (:data:`PROTECTED`: ``.mcp.json``,
  ``.retinue/``, ``.claude/``, ``.git/hooks``, ``.git/config`` and ``.git/modules``, or the
  whole ``.git`` when there is none yet), mounted read-only, also when it does not exist
  yet: bubblewrap then
  leaves an empty placeholder on the host (an empty file or directory, which every loader
  reads as nothing) that :meth:`Sandbox.release` removes once no command of this process
  runs in that workspace any more;
- the data directory (``RETINUE_HOME``) and the user's secrets (:data:`SECRET_PATHS` under
  ``$HOME``: ``~/.ssh``, ``~/.aws``, ``~/.config``, ...) hidden behind empty mounts, even when
  they lie inside the workspace;
- its own user, PID, IPC, UTS and network namespaces (no network at all unless
  ``RETINUE_SHELL_NETWORK=1``), so it can neither see nor signal Retinue's processes;
- ``--die-with-parent``: when Retinue dies, even by SIGKILL, the kernel kills the sandbox,
  and with it every process inside (they share its PID namespace).

Every command, sandboxed or not, gets only the environment variables of :data:`SAFE_ENV`
(plus ``LC_*``): no API keys, tokens or passwords. Where ``bwrap`` is missing or cannot create
namespaces (a container without user namespaces, say), :func:`bwrap_problem` says why and the
command runs unsandboxed, with the reduced environment.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "BWRAP_ENV",
    "NETWORK_ENV",
    "PROTECTED",
    "SAFE_ENV",
    "SECRET_PATHS",
    "Sandbox",
    "bwrap_problem",
    "safe_environment",
]

SAFE_ENV = frozenset(
    {"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "TZ", "TMPDIR"}
)
"""The environment variables a command inherits (and every ``LC_*``); nothing else."""

SECRET_PATHS = (
    ".ssh",
    ".aws",
    ".azure",
    ".config",
    ".gnupg",
    ".docker",
    ".kube",
    ".netrc",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".password-store",
    ".local/share/keyrings",
    ".retinue",
)
"""Paths under ``$HOME`` that a sandboxed command cannot see."""

PROTECTED = (".mcp.json", ".retinue", ".claude", ".git/hooks", ".git/config", ".git/modules")
"""Paths in the workspace that a sandboxed command may read but not write, create, rename or
remove: a command could otherwise make the next ``retinue run`` (or ``git commit``) start a
program of its choosing outside the sandbox (``.git/modules`` holds submodules' hooks and
configs). ``.git`` itself cannot be renamed; without a ``.git`` directory, it is read-only."""

NETWORK_ENV = "RETINUE_SHELL_NETWORK"
"""Set to ``1`` to give sandboxed commands the network (they have none by default)."""

BWRAP_ENV = "RETINUE_BWRAP"
"""The bubblewrap program to use (default ``bwrap``, found on ``PATH``)."""


def safe_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The allow-listed part of ``environ`` (``PATH`` defaults to the usual directories)."""
    env = {k: v for k, v in environ.items() if k in SAFE_ENV or k.startswith("LC_")}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    return env


@functools.cache
def bwrap_problem(bwrap: str = "bwrap") -> str | None:
    """Why commands cannot be sandboxed on this machine, or ``None`` when they can.

    Runs one trivial sandbox (namespaces included) the first time it is asked.
    """
    path = shutil.which(bwrap)
    if path is None:
        return f"bubblewrap ({bwrap}) is not installed (Debian: `apt-get install bubblewrap`)"
    probe = [path, "--die-with-parent", "--unshare-all", "--ro-bind", "/", "/"]
    probe += ["--dev", "/dev", "--proc", "/proc", "--", "true"]
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap cannot run here: {exc}"
    if done.returncode != 0:
        why = " ".join(done.stderr.split())[:200] or f"exit code {done.returncode}"
        return f"bubblewrap cannot create a sandbox here: {why}"
    return None


@dataclass(frozen=True, slots=True)
class Sandbox:
    """Where a sandboxed command may write (``workspace``) and what it cannot see."""

    workspace: Path
    hidden: tuple[Path, ...] = ()
    network: bool = False
    bwrap: str = "bwrap"
    data_dir: Path | None = None  # hidden (in ``hidden``); made first when in the workspace

    @classmethod
    def for_workspace(
        cls, workspace: Path, data_dir: Path, environ: Mapping[str, str] = os.environ
    ) -> Sandbox:
        """The sandbox for this workspace: ``data_dir`` and ``$HOME``'s secrets hidden."""
        home = Path(environ.get("HOME") or Path.home())
        hidden = [data_dir, *(home / p for p in SECRET_PATHS)]
        return cls(
            workspace=workspace.resolve(),
            hidden=tuple(dict.fromkeys(p.resolve() for p in hidden)),
            network=environ.get(NETWORK_ENV, "") == "1",
            bwrap=environ.get(BWRAP_ENV) or "bwrap",
            data_dir=data_dir.resolve(),
        )

    def argv(self, command: str) -> list[str]:
        """``bwrap ... -- bash -c command``. Call :meth:`release` once the command has
        ended: this counts it as running in the workspace until then."""
        args = [shutil.which(self.bwrap) or self.bwrap, "--die-with-parent", "--unshare-all"]
        if self.network:
            args.append("--share-net")
        args += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
        # /run holds sockets (docker.sock, the D-Bus buses) that a read-only mount does not
        # stop a client from connecting to; only the DNS resolver's files come back
        args += ["--tmpfs", "/run", "--ro-bind-try", _RESOLVED, _RESOLVED]
        around = [p for p in self.hidden if self.workspace.is_relative_to(p)]
        inside = [p for p in self.hidden if p not in around]
        args += _hide(around)
        args += ["--bind", str(self.workspace), str(self.workspace)]
        args += self._protect()
        args += _hide(inside)
        args += ["--chdir", str(self.workspace), "--", "bash", "-c", command]
        return args

    def _protect(self) -> list[str]:
        """Read-only mounts over :data:`PROTECTED`; empty read-only ones where absent."""
        ws = self.workspace
        args: list[str] = []
        made: list[Path] = []
        if self.data_dir is not None and self.data_dir.is_relative_to(ws):
            with contextlib.suppress(OSError):  # hidden below; must exist to be hidden
                self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            # each directory above it a mount point too: none can be renamed away and
            # replaced by one holding a data directory (and approvals) of the command's own
            between = [p for p in self.data_dir.parents if p.is_relative_to(ws) and p != ws]
            for parent in reversed(between):
                args += ["--bind", str(parent), str(parent)]
        git = ws / ".git"
        if git.is_dir() and not git.is_symlink():
            # .git itself becomes a mount point, so it cannot be renamed away and replaced
            # by a repository of the command's making; inside, only what runs is read-only
            args += ["--bind", str(git), str(git)]
            wanted = [ws / p for p in PROTECTED]
        else:  # a worktree's .git file, or none yet: no repository to make
            wanted = [ws / p for p in PROTECTED if not p.startswith(".git/")] + [git]
        for path in wanted:
            if path.exists():
                args += ["--ro-bind", str(path), str(path)]
            elif path.relative_to(ws).as_posix() in _FILES:  # an empty, unwritable file
                args += ["--ro-bind", "/dev/null", str(path)]
                made.append(path)
            else:
                args += ["--tmpfs", str(path), "--remount-ro", str(path)]
                made.append(path)
        with _LOCK:
            _RUNNING[ws] += 1
            _PLACEHOLDERS.setdefault(ws, set()).update(made)
        return args

    def release(self) -> None:
        """The command started by :meth:`argv` has ended: when it was the last one in this
        workspace, remove the placeholders bubblewrap left that are still empty (not while
        another runs: removing a mount point on the host unmounts it in every sandbox)."""
        with _LOCK:
            _RUNNING[self.workspace] -= 1
            if _RUNNING[self.workspace] > 0:
                return
            del _RUNNING[self.workspace]
            made = _PLACEHOLDERS.pop(self.workspace, set())
        for path in sorted(made, key=lambda p: len(p.parts), reverse=True):
            with contextlib.suppress(OSError):  # gone, not empty, or written since: kept
                if path.is_symlink():
                    continue
                if path.is_dir():
                    path.rmdir()
                elif path.is_file() and path.stat().st_size == 0:
                    path.unlink()


_FILES = frozenset({".mcp.json", ".git/config"})  # the rest of PROTECTED are directories
_LOCK = threading.Lock()
_RUNNING: Counter[Path] = Counter()  # sandboxed commands running, per workspace
_PLACEHOLDERS: dict[Path, set[Path]] = {}  # what bubblewrap may have created, per workspace
_RESOLVED = "/run/systemd/resolve"  # where /etc/resolv.conf points on systemd machines


def _hide(paths: Sequence[Path]) -> list[str]:
    """Mounts that make each existing path look empty (a directory) or absent (a file)."""
    args: list[str] = []
    for path in sorted(paths, key=lambda p: len(p.parts)):
        if path.is_dir():
            args += ["--tmpfs", str(path)]
        elif path.exists():
            args += ["--ro-bind", "/dev/null", str(path)]
    return args
