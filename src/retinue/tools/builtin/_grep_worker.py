"""The work of ``Grep``, run in a child process that can be killed.

Python's ``re`` has no timeout and holds the GIL while it backtracks, so a pattern such as
``^(a|aa)+$`` could freeze the agent's event loop for seconds, and a thread running it
cannot be stopped. Here the whole search (walk, reads, matching) runs in a separate
process: :mod:`retinue.tools.builtin.search` sends the query as JSON on stdin, reads the
answer as JSON on stdout, and kills the process when its time is up.

Standard library, :mod:`retinue.errors`, :mod:`retinue.tools.builtin._fsafe` and
:mod:`retinue.tools.builtin.pathrules` only, so the process starts without importing the
rest of the package. Files the gate's :class:`~retinue.tools.builtin.pathrules.PathFilter`
hides (``hidden``, ``roots``) are left out before they are opened.
"""

from __future__ import annotations

import bisect
import fnmatch
import json
import os
import re
import stat
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retinue.errors import ToolError
from retinue.tools.builtin._fsafe import open_dir, open_regular, walk
from retinue.tools.builtin.pathrules import PathFilter

__all__ = ["Query", "main", "search"]

_MAX_FILE_BYTES = 10 * 1024 * 1024
_MAX_SHOWN_LINE = 500
_SKIP_DIRS = frozenset(
    {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", ".mypy_cache",
     ".pytest_cache", ".ruff_cache", ".tox"}
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Query:
    """One Grep call, as sent to the worker."""

    root: str
    parts: list[str]
    pattern: str
    flags: int
    multiline: bool
    globs: list[str]
    types: list[str]
    mode: str
    before: int
    after: int
    numbers: bool
    limit: int
    hidden: list[str] = field(default_factory=list)  # a PathFilter's patterns and roots
    roots: list[str] = field(default_factory=list)


def _name_matches(rel: str, globs: list[str]) -> bool:
    for g in globs:
        g = g.removeprefix("**/")
        target = rel if "/" in g else rel.rsplit("/", 1)[-1]
        if fnmatch.fnmatchcase(target, g):
            return True
    return False


def _candidates(q: Query) -> Iterator[tuple[str, str, int]]:
    """``(path shown to the model, name, folder descriptor)`` of every file to search."""
    root = Path(q.root)
    prefix = "/".join(q.parts)
    if q.parts:
        parent = open_dir(root, q.parts[:-1], shown=prefix)
        try:
            st = os.stat(q.parts[-1], dir_fd=parent, follow_symlinks=False)
            if not stat.S_ISDIR(st.st_mode):
                yield prefix, q.parts[-1], parent
                return
        finally:
            os.close(parent)
    for rel, names, dir_fd in walk(root, q.parts, skip=_SKIP_DIRS):
        folder = "/".join(x for x in (prefix, rel) if x)
        for name in names:
            inner = f"{rel}/{name}" if rel else name
            if q.globs and not _name_matches(inner, q.globs):
                continue
            if q.types and not _name_matches(name, q.types):
                continue
            yield (f"{folder}/{name}" if folder else name), name, dir_fd


def _read(dir_fd: int, name: str, shown: str) -> tuple[str | None, float, bool]:
    """``(text or None, mtime, refused)``: None for a binary, large or refused file."""
    try:
        if stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
            return None, 0.0, False  # symlinks are not followed (as ripgrep does by default)
        fd = open_regular(dir_fd, name, "read", shown)
    except (ToolError, OSError):
        return None, 0.0, True
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if st.st_size > _MAX_FILE_BYTES:
            return None, 0.0, False
        data = f.read(_MAX_FILE_BYTES + 1)
    if b"\0" in data[:8192]:
        return None, 0.0, False
    return data.decode("utf-8", errors="replace"), st.st_mtime, False


def search(q: Query) -> dict[str, Any]:
    """Run the query; ``lines`` to show (at most ``q.limit``) and the ``total`` there were."""
    rx = re.compile(q.pattern, q.flags)
    found: list[tuple[float, str, int]] = []
    shown_lines: list[str] = []
    total_lines = refused = left_out = 0
    hidden = PathFilter(tuple(q.hidden), tuple(q.roots))
    for shown, name, dir_fd in _candidates(q):
        if hidden.hides(shown):  # (never opened)
            left_out += 1
            continue
        text, mtime, was_refused = _read(dir_fd, name, shown)
        refused += was_refused
        if text is None:
            continue
        matched = _matching_lines(text, rx, q.multiline)
        if not matched:
            continue
        found.append((mtime, shown, len(matched)))
        if q.mode == "content":
            lines = _content_lines(text.splitlines(), matched, shown, q)
            total_lines += len(lines)
            shown_lines.extend(lines[: max(q.limit - len(shown_lines), 0)])
    if q.mode == "files_with_matches":
        found.sort(key=lambda f: (-f[0], f[1]))
        shown_lines = [p for _, p, _ in found[: q.limit]]
    elif q.mode == "count":
        shown_lines = [f"{p}:{n}" for _, p, n in found[: q.limit]]
    total = total_lines if q.mode == "content" else len(found)
    return {
        "lines": shown_lines,
        "total": total,
        "files": len(found),
        "refused": refused,
        "hidden": left_out,
    }


def main() -> None:
    """Read a :class:`Query` as JSON on stdin, write the answer (or ``error``) on stdout."""
    q = Query(**json.load(sys.stdin))
    try:
        result = search(q)
    except ToolError as exc:
        result = {"error": str(exc)}
    except FileNotFoundError:
        result = {"error": f"path does not exist: {'/'.join(q.parts)}"}
    except OSError as exc:
        result = {"error": f"{'/'.join(q.parts) or '.'}: {exc.strerror}"}
    json.dump(result, sys.stdout)


def _matching_lines(text: str, rx: re.Pattern[str], multiline: bool) -> list[int]:
    """0-based numbers of the lines holding a match."""
    if not multiline:
        return [i for i, line in enumerate(text.splitlines()) if rx.search(line)]
    starts = [0] + [m.end() for m in re.finditer("\n", text)]
    hit: set[int] = set()
    for m in rx.finditer(text):
        first = bisect.bisect_right(starts, m.start()) - 1
        last = bisect.bisect_right(starts, max(m.end() - 1, m.start())) - 1
        hit.update(range(first, last + 1))
    return sorted(hit)


def _short(line: str) -> str:
    return line if len(line) <= _MAX_SHOWN_LINE else line[:_MAX_SHOWN_LINE] + "..."


def _content_lines(lines: list[str], matched: list[int], shown: str, q: Query) -> list[str]:
    wanted: set[int] = set()
    for i in matched:
        wanted.update(range(max(i - q.before, 0), min(i + q.after, len(lines) - 1) + 1))
    hits = set(matched)
    out: list[str] = []
    prev = -2
    for i in sorted(wanted):
        if out and i != prev + 1 and (q.before or q.after):
            out.append("--")
        sep = ":" if i in hits else "-"
        num = f"{i + 1}{sep}" if q.numbers else ""
        out.append(f"{shown}{sep}{num}{_short(lines[i])}")
        prev = i
    return out
