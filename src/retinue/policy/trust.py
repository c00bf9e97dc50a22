"""Trust for the commands that workspace files define.

A workspace file may name a program to run: a ``.mcp.json`` server, a role's inline
``mcpServers``, a project hook in ``.claude/settings.json``. Whoever can write the workspace
(a cloned repository, a sandboxed ``Bash`` command) could otherwise make the next ``retinue
run`` start anything, outside the sandbox, as the user, with the user's environment. So such a
:class:`Definition` starts only once the user approved that exact definition; the approval is
kept by its :meth:`~Definition.digest` in ``<data dir>/trust.json`` (the data directory, which
the sandbox hides), and a changed definition needs approval again.

The digest covers the kind, the name, the command, its arguments, the names of its
environment variables, ``extra`` (a hash, made by the caller, of what else decides what runs:
the environment's values as written, unexpanded; the working directory; a remote server's
headers) and the file that defines it (resolved). The source is part of it on purpose: a
definition such as ``python tools/server.py`` runs whatever that workspace's
``tools/server.py`` is, so approving it in one project must not approve the same text in a
repository cloned tomorrow. Values are never stored, only hashed: they may hold secrets.

The user's own files (``~/.retinue``, ``~/.claude``, the data directory) need no approval,
even when the workspace contains them: a sandboxed command cannot write them.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shlex
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retinue.errors import PolicyError, UntrustedError

__all__ = [
    "APPROVE_HINTS",
    "Definition",
    "TrustStore",
    "UntrustedError",
    "needs_trust",
    "printable",
    "refuse",
    "settings_definition",
    "settings_trust",
    "untrusted_line",
]

TRUST_FILE = "trust.json"
MAX_TRUST_BYTES = 4 * 1024 * 1024  # a trust file larger than this is refused, not parsed
APPROVE_HINTS = {
    "mcp": "retinue mcp approve {name}",
    "hook": "retinue hooks approve {name}",
    "settings": "retinue mcp approve {name}",
}
"""The command that approves a definition of each kind (``{name}`` is shell-quoted)."""


@dataclass(frozen=True)
class Definition:
    """One command that a file defines."""

    kind: str  # "mcp" | "hook" | ...
    name: str  # server name, or "PreToolUse:Bash#0"-like for a hook
    command: str  # for a remote MCP server: its URL
    args: tuple[str, ...]
    env_keys: tuple[str, ...]  # names only, sorted (values may hold secrets: never stored)
    source: Path  # the file that defines it
    extra: str = ""  # a hash of what else decides what runs (env values as written, cwd...)

    def digest(self) -> str:
        """sha256 over everything above, the source resolved (see the module text)."""
        parts = [self.kind, self.name, self.command, list(self.args), sorted(self.env_keys),
                 _resolved(self.source), self.extra]  # fmt: skip
        blob = json.dumps(parts, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def describe(self, limit: int = 200) -> str:
        """The command line as a person reads it (control characters escaped), cut at
        ``limit`` characters (ask about it with a limit that shows all of it)."""
        text = printable(" ".join(shlex.quote(p) for p in (self.command, *self.args)))
        return text if len(text) <= limit else text[: limit - 1] + "…"


def printable(text: str) -> str:
    """``text`` with every character a terminal would act on (escape sequences, carriage
    returns, newlines) written as ``\\xNN`` / ``\\uNNNN``: a file's text must not redraw
    the prompt that asks about it."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def extra_digest(value: Any) -> str:
    """A hash of ``value`` (JSON-able) for :attr:`Definition.extra`."""
    blob = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _resolved(path: Path) -> str:
    try:
        return str(path.expanduser().resolve())
    except (OSError, RuntimeError):  # a symlink loop
        return os.path.abspath(path)


def _inside(path: Path, roots: Iterable[Path]) -> bool:
    return any(path == r or path.is_relative_to(r) for r in roots)


def _inside_any(paths: Iterable[Path], root: Path) -> bool:
    return any(_inside(p, [root]) for p in paths)


def needs_trust(d: Definition, workspace: Path, home: Path | None = None) -> bool:
    """Whether ``d`` must be approved before it runs: its file lies inside ``workspace``,
    as written or once symlinks are resolved, and is not one of the user's own (under the
    data directory ``home``, ``~/.retinue`` or ``~/.claude``, both ways). Those count as the
    user's own only while the workspace does not lie inside them (in ``retinue chat`` run
    from ``~/.claude``, a command could write ``~/.claude/agents``)."""
    lexical = Path(os.path.abspath(d.source.expanduser()))
    real = Path(_resolved(d.source))
    ws = {Path(os.path.abspath(workspace.expanduser())), Path(_resolved(workspace))}
    if not (_inside(lexical, ws) or _inside(real, ws)):
        return False
    user_home = Path.home()
    own = [user_home / ".retinue", user_home / ".claude", *([home] if home else [])]
    own_roots = {Path(_resolved(p)) for p in own} | {Path(os.path.abspath(p)) for p in own}
    own_roots = {r for r in own_roots if not _inside_any(ws, r)}
    return not (_inside(lexical, own_roots) and _inside(real, own_roots))


def untrusted_line(d: Definition) -> str:
    """One line: which file defines what, that it was not started, and how to approve it."""
    hint = APPROVE_HINTS.get(d.kind, APPROVE_HINTS["mcp"]).format(name=shlex.quote(d.name))
    what = "MCP server" if d.kind == "mcp" else d.kind
    return printable(
        f"{d.source}: {what} {d.name!r} ({d.describe()}) is not approved and was not started; "
        f"to allow it: {hint}"
    )


def settings_definition(path: Path, section: Mapping[str, Any]) -> Definition:
    """What approving a project settings file (``.claude/settings*.json``) lets it do: its
    ``permissions.allow`` rules and ``defaultMode``, which loosen what may run (its ``deny``
    and ``ask`` rules apply without approval; see :mod:`retinue.policy.settings`). Named by
    the file's name, so ``retinue mcp approve settings.json`` approves it."""
    allow, mode = section.get("allow"), section.get("defaultMode")
    rules = tuple(str(r) for r in allow) if isinstance(allow, list) else ()
    command = f"defaultMode={mode}" if mode is not None else "allow"
    extra = extra_digest({"allow": allow, "defaultMode": mode})
    return Definition("settings", path.name, command, rules, (), path, extra)


def settings_trust(store: TrustStore) -> Callable[[Path, Any], bool]:
    """The ``trusted(path, section)`` that :func:`retinue.policy.settings.load_permissions`
    asks: whether the user approved that file's loosening as it is now."""

    def trusted(path: Path, section: Any) -> bool:
        return isinstance(section, Mapping) and store.is_trusted(settings_definition(path, section))

    return trusted


def refuse(d: Definition) -> UntrustedError:
    """The error for an unapproved definition that something was asked to start."""
    return UntrustedError(untrusted_line(d))


class TrustStore:
    """The approved definitions, by digest, in ``<data_dir>/trust.json`` (mode 0600).

    Reads see the file as it is now (another process may have approved something); writes
    are atomic (a temporary file renamed over it) and serialised by a lock file.
    """

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.path = data_dir / TRUST_FILE

    def is_trusted(self, d: Definition) -> bool:
        return d.digest() in self._read()

    def approve(self, defs: Iterable[Definition]) -> None:
        """Record ``defs`` as approved (names, commands and env keys, never values)."""
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        with self._locked():
            entries = self._read()
            for d in defs:
                entries[d.digest()] = {
                    "kind": d.kind, "name": d.name, "command": d.command, "args": list(d.args),
                    "env_keys": sorted(d.env_keys), "source": _resolved(d.source),
                    "approved_at": now,
                }  # fmt: skip
            self._write(entries)

    def revoke(self, defs: Iterable[Definition] = (), *, names: Iterable[str] = ()) -> int:
        """Forget approvals, of these definitions or of every one with these names; how many."""
        digests, wanted = {d.digest() for d in defs}, set(names)
        with self._locked():
            entries = self._read()
            gone = [k for k, v in entries.items() if k in digests or v.get("name") in wanted]
            for k in gone:
                del entries[k]
            if gone:
                self._write(entries)
        return len(gone)

    def list(self) -> list[dict[str, Any]]:
        """Every approval: ``digest``, ``kind``, ``name``, ``command``, ``args``,
        ``env_keys``, ``source``, ``approved_at``."""
        entries = sorted(self._read().items(), key=lambda kv: str(kv[1].get("name", "")))
        return [{"digest": k, **v} for k, v in entries]

    def _read(self) -> dict[str, dict[str, Any]]:
        try:
            with open(self.path, "rb") as f:
                raw = f.read(MAX_TRUST_BYTES + 1)
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise PolicyError(f"cannot read {self.path}: {exc.strerror or exc}") from None
        if len(raw) > MAX_TRUST_BYTES:
            raise PolicyError(f"{self.path}: larger than {MAX_TRUST_BYTES} bytes; not read")
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise PolicyError(
                f"{self.path}: not valid JSON ({exc}); remove it to approve afresh"
            ) from None
        approved = data.get("approved") if isinstance(data, dict) else None
        if not isinstance(approved, dict):
            return {}
        return {k: v for k, v in approved.items() if isinstance(v, dict)}

    def _write(self, entries: dict[str, dict[str, Any]]) -> None:
        text = json.dumps({"version": 1, "approved": entries}, ensure_ascii=False, indent=1)
        fd, tmp = tempfile.mkstemp(prefix=".trust-", suffix=".tmp", dir=self.data_dir)
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text + "\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        try:
            self.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(self.data_dir / ".trust.lock", os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise PolicyError(f"cannot write approvals in {self.data_dir}: {exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)
