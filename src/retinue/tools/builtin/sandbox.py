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
  ``RETINUE_SHELL_NETWORK=1``), so it can neither see nor signal Retinue's processes nor read
  their ``/proc/<pid>/environ``;
- no capabilities and no root: inside its user namespace the command runs as the invoking
  user, or as ``nobody`` (65534) when Retinue runs as root, with ``--cap-drop ALL``, so it
  cannot unmount or remount what is read-only (as root with the capabilities bubblewrap
  keeps by default, ``umount`` lifted every read-only mount). Where user namespaces are
  unavailable the command keeps the caller's user but still loses every capability
  (:func:`confinement` says which holds);
- ``--new-session`` (no ``TIOCSTI`` into Retinue's terminal) and ``--die-with-parent``: when
  Retinue dies, even by SIGKILL, the kernel kills the sandbox, and with it every process
  inside (they share its PID namespace).

:meth:`Sandbox.wrap` runs any program the same way (an MCP server or hook the workspace
defines); :func:`lifetime_wrap` gives a program trusted to run outside the sandbox only the
PID namespace, so that nothing it starts outlives it.

Every command, sandboxed or not, gets only the environment variables of :data:`SAFE_ENV`
(plus ``LC_*``): no API keys, tokens or passwords. Where ``bwrap`` is missing or cannot create
namespaces (a container without user namespaces, say), :func:`bwrap_problem` says why and the
command runs unsandboxed, with the reduced environment.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

__all__ = [
    "BWRAP_ENV",
    "HOME_PROTECTED",
    "NETWORK_ENV",
    "PROTECTED",
    "SAFE_ENV",
    "SECRET_PATHS",
    "Confinement",
    "RuleMounts",
    "RulePaths",
    "Sandbox",
    "bwrap_problem",
    "confinement",
    "lifetime_wrap",
    "safe_environment",
    "trusted_program",
]

SAFE_ENV = frozenset(
    {"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "TZ", "TMPDIR"}
)
"""The environment variables a command inherits (and every ``LC_*``); nothing else."""

SECRET_PATHS = (
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".profile",
    ".zshrc",
    ".zprofile",
    ".zshenv",
    ".bash_history",
    ".zsh_history",
    ".python_history",
    ".codex",
    ".claude/.credentials.json",
    ".claude.json",
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
"""Paths under ``$HOME`` that a sandboxed command cannot see (credentials, and histories and
tool files where users keep API keys)."""

HOME_PROTECTED = (
    ".claude",
    ".gitconfig",
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".profile",
    ".zshrc",
    ".zprofile",
    ".zshenv",
    ".local/bin",
)
"""Paths under ``$HOME`` that decide what the user's next shell, git or Claude Code runs: when
``$HOME`` lies inside the workspace (``retinue chat`` started in ``~``), they are read-only
to a sandboxed command, also before they exist, as :data:`PROTECTED` is."""

PROTECTED = (
    ".mcp.json",
    ".retinue",
    ".claude",
    ".git/hooks",
    ".git/config",
    ".git/config.worktree",
    ".git/commondir",
    ".git/info",
    ".git/modules",
    ".git/worktrees",
)
"""Paths in the workspace that a sandboxed command may read but not write, create, rename or
remove: a command could otherwise make the next ``retinue run`` (or the user's ``git
status``) start a program of its choosing outside the sandbox: ``.git/config`` names
programs (``core.fsmonitor``, filters, ``core.hooksPath``), ``.git/commondir`` and each
``.git/worktrees/*/commondir`` say where git reads its config from, ``.git/info`` holds
attributes that pick filters, ``.git/modules`` submodules' hooks and configs. Everything else
in ``.git`` (objects, refs, index, logs) stays writable, so commits work. ``.git`` itself
cannot be renamed; without a ``.git`` directory, or with a ``.git`` file (a worktree's), it is
read-only."""

NETWORK_ENV = "RETINUE_SHELL_NETWORK"
"""Set to ``1`` to give sandboxed commands the network (they have none by default)."""

BWRAP_ENV = "RETINUE_BWRAP"
"""The bubblewrap program to use (default ``bwrap``, found on ``PATH``)."""


def safe_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The allow-listed part of ``environ`` (``PATH`` defaults to the usual directories)."""
    env = {k: v for k, v in environ.items() if k in SAFE_ENV or k.startswith("LC_")}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    return env


@dataclass(frozen=True, slots=True)
class Confinement:
    """How far a sandbox confines its command on this machine.

    ``level``: ``"user"`` (a user namespace, not root inside, no capabilities), ``"caps"``
    (no user namespace: the caller's own user, every capability dropped) or ``"none"`` (no
    sandbox at all; ``problem`` says why)."""

    level: Literal["user", "caps", "none"]
    problem: str | None = None

    def describe(self) -> str:
        """One line for ``retinue doctor``."""
        if self.level == "user":
            return "bubblewrap: own user, PID, network and mount namespaces; no capabilities"
        if self.level == "caps":
            return (
                "bubblewrap without a user namespace: own PID, network and mount namespaces; "
                "every capability dropped"
            )
        return f"no sandbox: {self.problem}"


def trusted_program(name: str, *, workspace: Path | None = None) -> str | None:
    """Where ``name`` is, looked up on ``PATH`` without its relative entries and without any
    inside ``workspace`` or the current folder: a workspace's ``.venv/bin`` on ``PATH`` (``uv
    run``, an activated venv) must not let a sandboxed command plant the ``bwrap`` or ``git``
    that Retinue then starts on the host. A name with a ``/`` is taken as it is."""
    if "/" in name:
        return name if os.access(name, os.X_OK) else None
    avoid = [Path.cwd().resolve()] + ([workspace.resolve()] if workspace is not None else [])
    kept = []
    for entry in os.environ.get("PATH", os.defpath).split(os.pathsep):
        if not entry or not os.path.isabs(entry):
            continue
        real = Path(entry).resolve()
        if not any(real == a or real.is_relative_to(a) for a in avoid):
            kept.append(entry)
    return shutil.which(name, path=os.pathsep.join(kept))


def _inside_ids() -> list[str]:
    """``--uid``/``--gid`` inside the user namespace: the caller's, or nobody's for root."""
    uid, gid = os.getuid(), os.getgid()
    if uid == 0:
        uid, gid = _NOBODY, _NOBODY
    return ["--uid", str(uid), "--gid", str(gid)]


def _namespaces(level: str) -> list[str]:
    """bubblewrap's options for ``level`` (:class:`Confinement`): namespaces, no capabilities,
    a session of its own, and death with its parent."""
    common = ["--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    if level == "user":
        return [*common, "--unshare-all", "--unshare-user", *_inside_ids()]
    return [*common, "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts"]


@functools.cache
def confinement(bwrap: str = "bwrap") -> Confinement:
    """The strongest confinement bubblewrap gives on this machine; probed once (two trivial
    sandboxes at most) the first time it is asked."""
    path = trusted_program(bwrap)
    if path is None:
        why = f"bubblewrap ({bwrap}) is not installed (Debian: `apt-get install bubblewrap`)"
        return Confinement("none", why)
    why = ""
    for level in ("user", "caps"):
        probe = [path, *_namespaces(level), "--ro-bind", "/", "/", "--dev", "/dev"]
        probe += ["--proc", "/proc", "--", "true"]
        try:
            done = subprocess.run(probe, capture_output=True, text=True, timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return Confinement("none", f"bubblewrap cannot run here: {exc}")
        if done.returncode == 0:
            return Confinement(level)  # type: ignore[arg-type]
        why = why or " ".join(done.stderr.split())[:200] or f"exit code {done.returncode}"
    return Confinement("none", f"bubblewrap cannot create a sandbox here: {why}")


def bwrap_problem(bwrap: str = "bwrap") -> str | None:
    """Why commands cannot be sandboxed on this machine, or ``None`` when they can."""
    return confinement(bwrap).problem


def lifetime_wrap(argv: Sequence[str], bwrap: str = "bwrap") -> list[str]:
    """``argv`` in a PID namespace of its own, with the host's filesystem and the caller's
    privileges: for a program the user trusts to run outside the sandbox, so that everything
    it starts (``setsid`` children included) dies when it ends, is killed, or Retinue dies.
    ``argv`` unchanged where bubblewrap cannot run."""
    level = confinement(bwrap).level
    program = trusted_program(bwrap)
    if level == "none" or program is None:
        return list(argv)
    args = [program, "--die-with-parent", "--unshare-pid"]
    if level == "user" and os.getuid() != 0:
        args.append("--unshare-user")  # an unprivileged user needs one for the PID namespace
    args += ["--dev-bind", "/", "/", "--proc", "/proc", "--", *argv]
    return args


@dataclass(frozen=True, slots=True)
class RulePaths:
    """The existing paths deny rules name: ``hidden`` (Read), ``read_only`` (Edit);
    ``complete`` false when they could not all be found (too many files to look at)."""

    hidden: tuple[Path, ...] = ()
    read_only: tuple[Path, ...] = ()
    complete: bool = True


@runtime_checkable
class RuleMounts(Protocol):
    """What the permission gate (:class:`retinue.policy.gate.Policy`) tells the sandbox:
    the paths its deny rules keep from commands."""

    def sandbox_paths(self, workspace: Path) -> RulePaths: ...


@dataclass(frozen=True, slots=True)
class Sandbox:
    """Where a sandboxed command may write (``workspace``) and what it cannot see.

    ``denied``: paths no command may see (Read deny rules), ``read_only``: paths it may read
    but not change (Edit deny rules); both absolute, existing ones only."""

    workspace: Path
    hidden: tuple[Path, ...] = ()
    network: bool = False
    bwrap: str = "bwrap"
    data_dir: Path | None = None  # hidden (in ``hidden``); made first when in the workspace
    denied: tuple[Path, ...] = ()
    read_only: tuple[Path, ...] = ()
    home: Path | None = None  # its start-up files protected when inside the workspace

    @classmethod
    def for_workspace(
        cls,
        workspace: Path,
        data_dir: Path,
        environ: Mapping[str, str] = os.environ,
        *,
        denied: Sequence[Path] = (),
        read_only: Sequence[Path] = (),
    ) -> Sandbox:
        """The sandbox for this workspace: ``data_dir`` and ``$HOME``'s secrets hidden;
        ``$HOME``'s start-up files and Retinue's own code read-only where the workspace holds
        them."""
        home = Path(environ.get("HOME") or Path.home())
        hidden = [data_dir, *(home / p for p in SECRET_PATHS)]
        ws = workspace.resolve()
        return cls(
            workspace=ws,
            hidden=tuple(dict.fromkeys(p.resolve() for p in hidden)),
            network=environ.get(NETWORK_ENV, "") == "1",
            bwrap=environ.get(BWRAP_ENV) or "bwrap",
            data_dir=data_dir.resolve(),
            denied=tuple(denied),
            read_only=(*read_only, *_own_code(ws)),
            home=home.resolve(),
        )

    def argv(self, command: str) -> list[str]:
        """``bwrap ... -- bash -c command``. Call :meth:`release` once the command has
        ended: this counts it as running in the workspace until then."""
        return self.wrap(["bash", "-c", command])

    def wrap(self, argv: Sequence[str], *, network: bool | None = None) -> list[str]:
        """``bwrap ... -- argv``: any program, confined as a ``Bash`` command is (``network``:
        the host's network, else the sandbox's own setting). Call :meth:`release` once the
        program has ended."""
        level = confinement(self.bwrap).level
        found = trusted_program(self.bwrap, workspace=self.workspace)
        if found is None:  # (only inside the workspace: never one a command could plant)
            raise FileNotFoundError(f"no trusted {self.bwrap} outside the workspace on PATH")
        args = [found, *_namespaces(level)]
        if self.network if network is None else network:
            args.append("--share-net")
        args += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
        # /run holds sockets (docker.sock, the D-Bus buses) that a read-only mount does not
        # stop a client from connecting to; only the DNS resolver's files come back
        args += ["--tmpfs", "/run", "--ro-bind-try", _RESOLVED, _RESOLVED]
        around = [p for p in self.hidden if self.workspace.is_relative_to(p)]
        inside = [p for p in self.hidden if p not in around]
        args += _hide(around)
        args += ["--bind", str(self.workspace), str(self.workspace)]
        # (folders pinned first: a later read-only mount below one must stay on top)
        args += _pinned([*self.read_only, *self.denied], self.workspace)
        args += self._protect()
        args += _read_only(self.read_only)
        args += _hide([*inside, *self.denied])
        args += ["--chdir", str(self.workspace), "--", *argv]
        return args

    def _protect(self) -> list[str]:
        """Read-only mounts over :data:`PROTECTED`; empty read-only ones where absent."""
        ws = self.workspace
        with _LOCK:
            if _RUNNING[ws] == 0:
                _SHARED[ws] = _hold(ws)  # (waits while another process removes its own)
            _RUNNING[ws] += 1
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
        home = self.home
        if home is not None and home.is_relative_to(ws):  # (.claude of the workspace: above)
            wanted += [home / p for p in HOME_PROTECTED if home != ws or p != ".claude"]
        for path in wanted:
            if path.name == "commondir" and _plant_commondir(path):
                made.append(path)  # (then read-only below, as one that exists)
            if path.exists():
                args += ["--ro-bind", str(path), str(path)]
            elif path.relative_to(ws).as_posix() in _FILES or path.name in _HOME_FILES:
                args += ["--ro-bind", "/dev/null", str(path)]
                made.append(path)
            else:
                args += ["--tmpfs", str(path), "--remount-ro", str(path)]
                made.append(path)
        with _LOCK:
            _PLACEHOLDERS.setdefault(ws, set()).update(made)
        return args

    def release(self) -> None:
        """The command started by :meth:`argv` has ended: when it was the last one in this
        workspace, remove the placeholders bubblewrap left that are still empty (not while
        another runs: removing a mount point on the host unmounts it in every sandbox)."""
        _unlink_git_links(self.workspace / ".git")
        with _LOCK:
            _RUNNING[self.workspace] -= 1
            if _RUNNING[self.workspace] > 0:
                return
            del _RUNNING[self.workspace]
            made = _PLACEHOLDERS.pop(self.workspace, set())
            shared = _SHARED.pop(self.workspace, None)
            if shared is not None:
                os.close(shared)
            alone = _alone(self.workspace)
        if alone is None:  # another process's command runs here: its mounts stay
            return
        try:  # (a commondir naming its own repository is always one of ours: another
            # process's, left while this one ran, goes too)
            _remove_placeholders({*made, self.workspace / ".git" / "commondir"})
        finally:
            os.close(alone)


def _unlink_git_links(git: Path, limit: int = 20_000) -> None:
    """Remove symbolic links a command left in ``git`` (a repository's ``.git``) that lead out
    of it: git makes none such, and one in place of ``logs/HEAD``, ``refs/heads`` or
    ``objects`` would send the user's next commit's writes outside the workspace. The top
    level, ``objects/*`` and everything under ``refs`` and ``logs`` are looked at, ``limit``
    entries at most."""
    if git.is_symlink() or not git.is_dir():
        return
    inside = git.resolve()  # (a link within it, as an old symbolic HEAD, stays)
    stack, seen = [(git, 1), (git / "objects", 1), (git / "refs", 64), (git / "logs", 64)], 0
    while stack and seen < limit:
        folder, depth = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        seen += len(entries)
        for entry in entries:
            if entry.is_symlink():
                with contextlib.suppress(OSError):
                    if not Path(os.path.realpath(entry.path)).is_relative_to(inside):
                        os.unlink(entry.path)
            elif depth > 1 and entry.is_dir(follow_symlinks=False):
                stack.append((Path(entry.path), depth - 1))


def _remove_placeholders(made: set[Path]) -> None:
    """Remove what bubblewrap (or :func:`_plant_commondir`) made that is still empty."""
    for path in sorted(made, key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(OSError):  # gone, not empty, or written since: kept
            if path.is_symlink():
                continue
            if path.is_dir():
                path.rmdir()
            elif path.name == "commondir":
                if path.read_bytes() == _SAME_DIR:
                    path.unlink()
            elif path.is_file() and path.read_bytes() in (b"", _SAME_DIR):
                path.unlink()


def _lock_file(workspace: Path) -> int | None:
    """An open descriptor of this user's lock file for ``workspace`` (outside it, where no
    sandboxed command reaches), or ``None`` where there can be none."""
    folder = Path(tempfile.gettempdir()) / f"retinue-sandbox-{os.getuid()}"
    name = hashlib.sha256(str(workspace).encode()).hexdigest()[:32]
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        seen = folder.lstat()
        if not stat.S_ISDIR(seen.st_mode) or seen.st_uid != os.getuid():
            return None  # (somebody else's: no lock rather than theirs)
        return os.open(folder / name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError:
        return None


def _hold(workspace: Path) -> int | None:
    """A shared lock on ``workspace`` held while this process runs commands there: another
    process (another ``retinue``) then leaves the placeholders they may share in place."""
    fd = _lock_file(workspace)
    if fd is not None:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
        except OSError:
            os.close(fd)
            return None
    return fd


def _alone(workspace: Path) -> int | None:
    """The exclusive lock on ``workspace`` when no process runs a command there (the caller
    removes its placeholders, then closes it), else ``None``. Without a lock file: alone."""
    fd = _lock_file(workspace)
    if fd is None:
        return os.open(os.devnull, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _plant_commondir(path: Path) -> bool:
    """Make a missing ``.git/commondir`` one that names the repository itself (``.``), so
    that it can be mounted read-only while a command runs: git reads an empty one as an
    error, and one the command wrote could send every later git command to a config of the
    command's choosing. Whether it was made here."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    except OSError:
        return False
    with os.fdopen(fd, "wb") as out:
        out.write(_SAME_DIR)
    return True


_FILES = frozenset(
    {".mcp.json", ".git/config", ".git/config.worktree", ".git/commondir"}
)  # the rest of PROTECTED are directories
_HOME_FILES = frozenset(p for p in HOME_PROTECTED if "/" not in p) - {".claude"}
_LOCK = threading.Lock()
_RUNNING: Counter[Path] = Counter()  # sandboxed commands running, per workspace
_SHARED: dict[Path, int | None] = {}  # the shared lock held per workspace (see _hold)
_PLACEHOLDERS: dict[Path, set[Path]] = {}  # what bubblewrap may have created, per workspace
_RESOLVED = "/run/systemd/resolve"  # where /etc/resolv.conf points on systemd machines
_NOBODY = 65534
_SAME_DIR = b".\n"  # a commondir naming its own repository


def _own_code(workspace: Path) -> list[Path]:
    """Where this Retinue's own Python runs from (its environment, ``sys.path``) when the
    workspace holds it: a ``.pth`` file or module a command wrote there would run inside
    Retinue, with its keys, at the next start."""
    found = []
    for entry in dict.fromkeys([sys.prefix, sys.exec_prefix, *sys.path]):
        if not entry or not os.path.isdir(entry):
            continue
        real = Path(entry).resolve()
        if real != workspace and real.is_relative_to(workspace):
            found.append(real)
    return [p for p in found if not any(p != q and p.is_relative_to(q) for q in found)]


def _pinned(paths: Sequence[Path], workspace: Path) -> list[str]:
    """Each folder between the workspace and ``paths`` mounted onto itself: a mount point
    cannot be renamed, so a command cannot move a hidden or read-only path's parent away,
    out from under its mount, and reach it under another name in a later command."""
    between: dict[Path, None] = {}
    for path in paths:
        if path.is_relative_to(workspace):
            between.update((p, None) for p in path.parents if p.is_relative_to(workspace))
    between.pop(workspace, None)
    args: list[str] = []
    for folder in sorted(between, key=lambda p: len(p.parts)):
        if folder.is_dir() and not folder.is_symlink():
            args += ["--bind", str(folder), str(folder)]
    return args


def _read_only(paths: Sequence[Path]) -> list[str]:
    """Read-only mounts over each existing path (parents first)."""
    args: list[str] = []
    for path in sorted(paths, key=lambda p: len(p.parts)):
        if path.exists() and not path.is_symlink():
            args += ["--ro-bind", str(path), str(path)]
    return args


def _hide(paths: Sequence[Path]) -> list[str]:
    """Mounts that make each existing path look empty (a directory) or absent (a file)."""
    args: list[str] = []
    for path in sorted(paths, key=lambda p: len(p.parts)):
        if path.is_dir():
            args += ["--tmpfs", str(path)]
        elif path.exists():
            args += ["--ro-bind", "/dev/null", str(path)]
    return args
