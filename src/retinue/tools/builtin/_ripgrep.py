"""The work of ``Grep``: ripgrep's ``rg``, from the ``ripgrep`` wheel, in a process of its own.

``rg`` matches in linear time (Rust's ``regex``: no backtracking, so no pattern can run
away), honours ``.gitignore`` and searches files on all cores. It is found through the
installed ``ripgrep`` distribution (:func:`rg_binary`), never through ``PATH``: a
workspace's ``.venv/bin`` on ``PATH`` must not let a sandboxed command plant the program
Retinue starts on the host. Where Retinue runs from an environment inside the workspace, the
sandbox mounts that environment read-only, the ``rg`` in it included. Without the wheel,
``Grep`` says so and does nothing else (one regex dialect, not two that depend on the install).

How every property of the Python search it replaces is kept:

- *confinement*: the folder searched is opened by descriptor without following a symlink;
  where bubblewrap can make a user namespace (:func:`walled`), ``rg`` runs in a filesystem
  that holds only that folder (mounted read-only from the descriptor) and the system's
  programs and libraries, with no network, so nothing outside the workspace exists for it,
  whatever a link inside the tree says or becomes while it walks (``rg`` walks by path, the
  Python search walked by descriptor). Elsewhere (macOS, a container without user
  namespaces) ``rg`` starts in the folder through ``/proc/self/fd``, and a folder inside the
  tree swapped for a symlink while it walks could lead it outside for that one search. A
  single file is opened here and handed to ``rg`` on stdin, so ``rg`` never resolves a path
  the model gave. ``--no-ignore-parent``, ``--no-ignore-global`` and ``--no-config`` keep it
  from reading ignore files or settings outside the workspace; its environment is empty;
- *symlinks*: ``rg`` does not follow them while it walks (no ``--follow``), and every file
  it reports is checked again here (``lstat`` relative to the folder's descriptor): one that
  is not a regular file with a single link (a hard link may have its other name outside)
  is dropped and counted as refused;
- *FIFOs*: ``rg`` skips every file that is not regular while it walks, and a single file is
  opened here non-blocking and refused unless regular;
- *deny rules*: a reported file that the gate's
  :class:`~retinue.tools.builtin.pathrules.PathFilter` hides is dropped before anything of it
  is shown, and counted;
- *bounded*: the process is killed after the caller's timeout, files over 10 MB are skipped
  (``--max-filesize``), at most :data:`OUTPUT_CAP` bytes of its output are read, and each
  shown line is cut at 500 characters;
- *untrusted pattern and glob*: passed as separate arguments after ``--regexp`` / ``--glob=``,
  with ``--`` before the path, no shell.

Standard library, :mod:`retinue.errors`, :mod:`retinue.tools.builtin._fsafe` and
:mod:`retinue.tools.builtin.pathrules` only.
"""

from __future__ import annotations

import base64
import functools
import importlib.metadata
import json
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retinue.tools.builtin.pathrules import PathFilter
from retinue.tools.builtin.sandbox import confinement, trusted_program

__all__ = ["OUTPUT_CAP", "Query", "Result", "rg_argv", "rg_binary", "shape", "walled"]

MAX_FILE_BYTES = 10 * 1024 * 1024
OUTPUT_CAP = 64 * 1024 * 1024
"""Most bytes of ``rg``'s output read; past that it is stopped and the answer says so."""
_MAX_SHOWN_LINE = 500
_SKIP_DIRS = (".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", ".mypy_cache",
              ".pytest_cache", ".ruff_cache", ".tox")  # fmt: skip


@functools.cache
def rg_binary() -> str | None:
    """The ``rg`` program the installed ``ripgrep`` distribution ships, or None."""
    try:
        files = importlib.metadata.distribution("ripgrep").files or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for entry in files:
        if entry.name in ("rg", "rg.exe"):
            path = Path(entry.locate()).resolve()
            if path.is_file() and os.access(path, os.X_OK):
                return str(path)
    return None


_SYSTEM = ("/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin")


def walled(argv: list[str], dir_fd: int, where: str) -> list[str] | None:
    """``argv`` (``rg`` first) run by bubblewrap with the folder ``dir_fd`` read-only at
    ``where`` as its working folder, the system's programs and libraries, and nothing else:
    no other file, no network, no other process; None where bubblewrap cannot make a user
    namespace here. The caller passes ``dir_fd`` on to the child, in a process group of its
    own (no ``--new-session``: with no ``/dev`` there is no terminal to reach, and the group
    lets the caller kill every process of it)."""
    bwrap = trusted_program("bwrap")
    if bwrap is None or confinement().level != "user":
        return None
    uid, gid = str(os.getuid()), str(os.getgid())
    out = [bwrap, "--unshare-all", "--unshare-user", "--uid", uid, "--gid", gid,
           "--die-with-parent", "--cap-drop", "ALL"]  # fmt: skip
    for path in _SYSTEM:
        out += ["--ro-bind-try", path, path]
    out += ["--ro-bind-fd", str(dir_fd), where, "--ro-bind", argv[0], argv[0]]
    return [*out, "--chdir", where, "--", *argv]


@dataclass(frozen=True, slots=True)
class Query:
    """One Grep call."""

    pattern: str
    ignore_case: bool
    multiline: bool
    glob: str | None
    types: tuple[str, ...]
    mode: str
    before: int
    after: int
    numbers: bool
    limit: int


@dataclass(slots=True)
class Result:
    """What the search found: ``lines`` to show (at most the limit), how many there were."""

    lines: list[str] = field(default_factory=list)
    total: int = 0
    files: int = 0
    refused: int = 0
    hidden: int = 0
    cut: bool = False  # (rg's output passed OUTPUT_CAP)


def rg_argv(rg: str, q: Query, path: str) -> list[str]:
    """The command line searching ``path`` (``.`` or ``-`` for stdin)."""
    argv = [rg, "--no-config", "--hidden", "--no-ignore-parent", "--no-ignore-global",
            "--no-require-git", "--no-messages", f"--max-filesize={MAX_FILE_BYTES}"]  # fmt: skip
    argv += [f"--glob=!{d}" for d in _SKIP_DIRS]
    if q.ignore_case:
        argv.append("--ignore-case")
    if q.multiline:
        argv += ["--multiline", "--multiline-dotall"]
    if q.glob:
        argv.append(f"--glob={q.glob}")
    if q.types:
        argv += [f"--type-add=retinue:{t}" for t in q.types] + ["--type=retinue"]
    if q.mode == "files_with_matches":
        argv += ["--files-with-matches", "--null"]
    elif q.mode == "count":
        argv += ["--count", "--null", "--with-filename"]
    else:
        argv += ["--json", f"--before-context={q.before}", f"--after-context={q.after}"]
    return [*argv, "--regexp", q.pattern, "--", path]


def _text(value: dict[str, str], *, path: bool = False) -> str:
    """A ``{"text": ...}`` or ``{"bytes": base64}`` value of ``rg --json``: a path as the
    file system names it, a line with what is not UTF-8 replaced."""
    if "text" in value:
        return value["text"]
    raw = base64.b64decode(value.get("bytes", ""))
    return os.fsdecode(raw) if path else raw.decode("utf-8", errors="replace")


def _rel(path: str) -> str:
    return path[2:] if path.startswith("./") else path


def _walk_order(rel: str) -> tuple[list[str], str]:
    """Folders' files before their subfolders', each sorted, as a top-down walk lists them."""
    *folders, name = rel.split("/")
    return folders, name


def _short(line: str) -> str:
    line = line.rstrip("\r")
    return line if len(line) <= _MAX_SHOWN_LINE else line[:_MAX_SHOWN_LINE] + "..."


class _Check:
    """The second look at each reported file (module text: symlinks, hard links, rules)."""

    def __init__(self, dir_fd: int | None, prefix: str, hidden: PathFilter, single: str):
        self.dir_fd, self.prefix, self.hidden, self.single = dir_fd, prefix, hidden, single
        self.refused = self.left_out = 0

    def shown(self, rel: str) -> str:
        if self.dir_fd is None:  # the one file handed over on stdin (a folder's file may be
            return self.single  # *named* "<stdin>": it is checked as any other)
        return f"{self.prefix}/{rel}" if self.prefix else rel

    def mtime(self, rel: str) -> float | None:
        """The file's mtime, or None when it is left out (and counted)."""
        if self.hidden.hides(self.shown(rel)):
            self.left_out += 1
            return None
        if self.dir_fd is None:
            return 0.0  # (the file on stdin: opened and checked by the caller)
        try:
            st = os.stat(rel, dir_fd=self.dir_fd, follow_symlinks=False)
        except OSError:
            st = None
        if st is None or not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
            self.refused += 1
            return None
        return st.st_mtime


def _split(data: bytes, sep: bytes, cut: bool) -> list[bytes]:
    parts = data.split(sep)
    return parts[:-1] if cut or not parts[-1] else parts  # (a cut record is dropped)


def _files(data: bytes, cut: bool, check: _Check) -> list[str]:
    found = []
    for raw in _split(data, b"\0", cut):
        rel = _rel(os.fsdecode(raw))
        mtime = check.mtime(rel)
        if mtime is not None:
            found.append((mtime, check.shown(rel)))
    found.sort(key=lambda mp: (-mp[0], mp[1]))
    return [p for _, p in found]


def _counts(data: bytes, cut: bool) -> Iterator[tuple[str, str]]:
    """``name NUL count LF`` records, read name first: a name may hold a newline."""
    pos = 0
    while (nul := data.find(b"\0", pos)) >= 0:
        end = data.find(b"\n", nul)
        if end < 0:
            if cut:
                return  # (a cut record is dropped)
            end = len(data)
        yield _rel(os.fsdecode(data[pos:nul])), data[nul + 1 : end].decode()
        pos = end + 1


def _events(data: bytes, cut: bool) -> Iterator[dict[str, Any]]:
    for line in _split(data, b"\n", cut):
        event = json.loads(line)
        if event.get("type") in ("match", "context"):
            yield event


def _grouped(events: Iterable[dict[str, Any]]) -> dict[str, list[tuple[int, bool, str]]]:
    """Each file's ``(line number, is a match, text)``, a multi-line match split in lines."""
    files: dict[str, list[tuple[int, bool, str]]] = {}
    for event in events:
        d = event["data"]
        rows = files.setdefault(_rel(_text(d["path"], path=True)), [])
        text = _text(d["lines"])
        lines = text.removesuffix("\n").split("\n")
        hit = event["type"] == "match"
        rows.extend((d["line_number"] + i, hit, line) for i, line in enumerate(lines))
    return files


def _content(rows: list[tuple[int, bool, str]], shown: str, q: Query) -> list[str]:
    out: list[str] = []
    prev = -2
    for number, hit, text in rows:
        if number <= prev:
            continue  # (a line two matches share)
        if out and number != prev + 1 and (q.before or q.after):
            out.append("--")
        sep = ":" if hit else "-"
        num = f"{number}{sep}" if q.numbers else ""
        out.append(f"{shown}{sep}{num}{_short(text)}")
        prev = number
    return out


def shape(
    q: Query, data: bytes, cut: bool, dir_fd: int | None, prefix: str, hidden: PathFilter,
    single: str = "",
) -> Result:  # fmt: skip
    """Turn ``rg``'s output into the lines the model sees (the Python search's format).

    ``dir_fd`` is the folder searched (None for a single file on stdin, shown as
    ``single``), ``prefix`` its path below the workspace; ``cut``: the output was cut short.
    """
    check = _Check(dir_fd, prefix, hidden, single)
    result = Result()
    if q.mode == "files_with_matches":
        found = _files(data, cut, check)
        result.lines, result.total, result.files = found[: q.limit], len(found), len(found)
    elif q.mode == "count":
        rows = sorted(_counts(data, cut), key=lambda rc: _walk_order(rc[0]))
        kept = [f"{check.shown(rel)}:{n}" for rel, n in rows if check.mtime(rel) is not None]
        result.lines, result.total, result.files = kept[: q.limit], len(kept), len(kept)
    else:
        grouped = _grouped(_events(data, cut))
        for rel in sorted(grouped, key=_walk_order):
            if check.mtime(rel) is None:
                continue
            lines = _content(grouped[rel], check.shown(rel), q)
            result.files += 1
            result.total += len(lines)
            result.lines.extend(lines[: max(q.limit - len(result.lines), 0)])
    result.refused, result.hidden = check.refused, check.left_out
    return result


def error_text(pattern: str, stderr: bytes) -> str:
    """What ``rg``'s complaint (exit status 2, nothing found) means for the model."""
    text = stderr.decode(errors="replace").strip()
    last = (text.splitlines() or ["no output"])[-1].removeprefix("error: ")
    if "multiline mode" in text:
        return f"the pattern {pattern!r} matches a line break: set multiline to true"
    if "regex" in text:
        return f"invalid regular expression {pattern!r}: {last[:300]}"
    return f"Grep failed: {last[:300]}"
