"""Search tools named and shaped as Claude Code's: ``Glob`` (file names) and ``Grep``
(file contents, Python regular expressions).

Both walk the file tree in a worker thread so the event loop stays responsive, stay inside
the workspace (symlinks leading out of it are skipped), and cap what they return. ``Grep``
skips binary files, files over 10 MB, and version-control / dependency / cache directories
(``.git``, ``node_modules``, ``.venv``, ``__pycache__``, ...).
"""

from __future__ import annotations

import asyncio
import bisect
import fnmatch
import os
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field

from retinue.errors import ToolError
from retinue.tools.base import Tool, ToolContext, tool
from retinue.tools.builtin.fs import is_binary
from retinue.tools.builtin.workspace import (
    display_path,
    inside,
    resolve_in_workspace,
    workspace_root,
)

__all__ = ["GLOB_LIMIT", "GREP_LINE_LIMIT", "glob_tool", "grep_tool", "search_tools"]

GLOB_LIMIT = 100
"""Most paths ``Glob`` (and ``Grep`` in files mode) lists unless told otherwise."""
GREP_LINE_LIMIT = 250
"""Most output lines ``Grep`` returns in content / count mode unless ``head_limit`` says."""
_MAX_FILE_BYTES = 10 * 1024 * 1024
_MAX_SHOWN_LINE = 500
_SKIP_DIRS = frozenset(
    {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", ".mypy_cache",
     ".pytest_cache", ".ruff_cache", ".tox"}
)  # fmt: skip
_TYPES = {
    "py": ("*.py", "*.pyi"),
    "js": ("*.js", "*.mjs", "*.cjs", "*.jsx"),
    "ts": ("*.ts", "*.tsx", "*.mts", "*.cts"),
    "go": ("*.go",),
    "rust": ("*.rs",),
    "java": ("*.java",),
    "c": ("*.c", "*.h"),
    "cpp": ("*.cpp", "*.cc", "*.cxx", "*.hpp", "*.hh", "*.h"),
    "md": ("*.md", "*.markdown"),
    "json": ("*.json",),
    "yaml": ("*.yaml", "*.yml"),
    "toml": ("*.toml",),
    "html": ("*.html", "*.htm"),
    "css": ("*.css", "*.scss"),
    "sh": ("*.sh", "*.bash"),
    "sql": ("*.sql",),
}
_GLOB_CHARS = re.compile(r"[*?\[{]")


def expand_braces(pattern: str, _budget: int = 64) -> list[str]:
    """``a.{ts,tsx}`` -> ``["a.ts", "a.tsx"]`` (nested groups too, at most 64 results)."""
    m = re.search(r"\{([^{}]*)\}", pattern)
    if m is None:
        return [pattern]
    out: list[str] = []
    for alt in m.group(1).split(","):
        out.extend(expand_braces(pattern[: m.start()] + alt + pattern[m.end() :]))
        if len(out) >= _budget:
            break
    return out[:_budget]


def _split_absolute(ctx: ToolContext, pattern: str, base: Path) -> tuple[Path, str]:
    """An absolute pattern becomes (its literal leading directory, the rest)."""
    if not os.path.isabs(pattern):
        return base, pattern
    parts = Path(pattern).parts
    cut = next((i for i, p in enumerate(parts) if _GLOB_CHARS.search(p)), len(parts) - 1)
    literal = os.path.join(*parts[:cut]) if cut else os.sep
    return resolve_in_workspace(ctx, literal), "/".join(parts[cut:])


def _glob_files(base: Path, root: Path, patterns: list[str]) -> list[tuple[float, Path]]:
    found: dict[Path, float] = {}
    for pat in patterns:
        for p in base.glob(pat):
            shown = Path(os.path.normpath(p))
            if shown in found or not p.is_file():
                continue
            if not inside(Path(os.path.realpath(p)), root):
                continue
            try:
                found[shown] = p.stat().st_mtime
            except OSError:
                continue
    return sorted(((m, p) for p, m in found.items()), key=lambda mp: (-mp[0], str(mp[1])))


@tool("Glob")
async def glob_tool(
    ctx: ToolContext,
    pattern: Annotated[
        str,
        Field(
            description='Glob pattern to match files against, e.g. "**/*.py" or "src/*.{ts,tsx}"'
        ),
    ],
    path: Annotated[
        str | None,
        Field(description="Directory to search in (default: the workspace root)"),
    ] = None,
) -> str:
    """Find files by name pattern in the workspace.

    Supports `**` (any depth), `*`, `?`, `[abc]` and `{a,b}`. Returns matching file paths
    (relative to the workspace), most recently modified first, at most 100.
    """
    root = workspace_root(ctx)
    base = resolve_in_workspace(ctx, path or ".")
    if not base.is_dir():
        raise ToolError(f"{path} is not a directory")
    base, rel_pattern = _split_absolute(ctx, pattern, base)
    try:
        hits = await asyncio.to_thread(_glob_files, base, root, expand_braces(rel_pattern))
    except ValueError as exc:
        raise ToolError(f"invalid glob pattern {pattern!r}: {exc}") from None
    if not hits:
        return "No files found"
    lines = [display_path(p, root) for _, p in hits[:GLOB_LIMIT]]
    if len(hits) > GLOB_LIMIT:
        lines.append(
            f"(showing {GLOB_LIMIT} of {len(hits)} files; use a more specific path or pattern)"
        )
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class _Query:
    rx: re.Pattern[str]
    multiline: bool
    globs: tuple[str, ...]
    types: tuple[str, ...]


def _name_matches(rel: str, globs: tuple[str, ...]) -> bool:
    for g in globs:
        g = g.removeprefix("**/")
        target = rel if "/" in g else rel.rsplit("/", 1)[-1]
        if fnmatch.fnmatchcase(target, g):
            return True
    return False


def _files(base: Path, root: Path, q: _Query, stop: threading.Event) -> Iterator[Path]:
    if base.is_file():
        yield base
        return
    for dirpath, dirnames, filenames in os.walk(base):
        if stop.is_set():
            return
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        for name in sorted(filenames):
            p = Path(dirpath, name)
            rel = p.relative_to(base).as_posix()
            if q.globs and not _name_matches(rel, q.globs):
                continue
            if q.types and not _name_matches(name, q.types):
                continue
            if p.is_symlink() and not inside(Path(os.path.realpath(p)), root):
                continue
            yield p


def _matching_lines(text: str, q: _Query) -> list[int]:
    """0-based numbers of the lines holding a match."""
    if not q.multiline:
        return [i for i, line in enumerate(text.splitlines()) if q.rx.search(line)]
    starts = [0] + [m.end() for m in re.finditer("\n", text)]
    hit: set[int] = set()
    for m in q.rx.finditer(text):
        first = bisect.bisect_right(starts, m.start()) - 1
        last = bisect.bisect_right(starts, max(m.end() - 1, m.start())) - 1
        hit.update(range(first, last + 1))
    return sorted(hit)


def _read_text(p: Path) -> str | None:
    try:
        if p.stat().st_size > _MAX_FILE_BYTES or is_binary(p):
            return None
        return p.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


@dataclass(frozen=True, slots=True)
class _Hit:
    path: Path
    lines: list[str]
    matched: list[int]


def _search(
    base: Path, root: Path, q: _Query, stop: threading.Event, keep_lines: bool
) -> list[_Hit]:
    hits: list[_Hit] = []
    for p in _files(base, root, q, stop):
        if stop.is_set():
            break
        text = _read_text(p)
        if text is None:
            continue
        matched = _matching_lines(text, q)
        if matched:
            hits.append(_Hit(p, text.splitlines() if keep_lines else [], matched))
    return hits


def _short(line: str) -> str:
    return line if len(line) <= _MAX_SHOWN_LINE else line[:_MAX_SHOWN_LINE] + "..."


def _content_lines(hit: _Hit, shown: str, before: int, after: int, numbers: bool) -> list[str]:
    wanted: set[int] = set()
    for i in hit.matched:
        wanted.update(range(max(i - before, 0), min(i + after, len(hit.lines) - 1) + 1))
    matched = set(hit.matched)
    out: list[str] = []
    prev = -2
    for i in sorted(wanted):
        if out and i != prev + 1 and (before or after):
            out.append("--")
        sep = ":" if i in matched else "-"
        num = f"{i + 1}{sep}" if numbers else ""
        out.append(f"{shown}{sep}{num}{_short(hit.lines[i])}")
        prev = i
    return out


def _mtime(p: Path) -> float:
    try:
        return p.stat().st_mtime
    except OSError:
        return 0.0


def _cap(lines: list[str], limit: int, what: str) -> str:
    if len(lines) <= limit:
        return "\n".join(lines)
    more = f"(output cut at {limit} of {len(lines)} {what}; narrow the search or raise head_limit)"
    return "\n".join([*lines[:limit], more])


@tool("Grep")
async def grep_tool(
    ctx: ToolContext,
    pattern: Annotated[
        str, Field(description="Regular expression (Python re syntax) to search for")
    ],
    path: Annotated[
        str | None, Field(description="File or directory to search (default: the workspace root)")
    ] = None,
    glob: Annotated[
        str | None,
        Field(description='Only search files matching this glob, e.g. "*.py", "*.{ts,tsx}"'),
    ] = None,
    output_mode: Annotated[
        Literal["files_with_matches", "content", "count"],
        Field(
            description='"files_with_matches" (default) lists matching files; "content" shows '
            'matching lines; "count" shows the number of matching lines per file'
        ),
    ] = "files_with_matches",
    case_insensitive: Annotated[
        bool, Field(alias="-i", description="Case-insensitive search")
    ] = False,
    line_numbers: Annotated[
        bool, Field(alias="-n", description='Show line numbers (output_mode "content")')
    ] = True,
    after: Annotated[
        int | None,
        Field(alias="-A", ge=0, description='Lines to show after each match ("content")'),
    ] = None,
    before: Annotated[
        int | None,
        Field(alias="-B", ge=0, description='Lines to show before each match ("content")'),
    ] = None,
    context: Annotated[
        int | None,
        Field(
            alias="-C", ge=0, description='Lines to show before and after each match ("content")'
        ),
    ] = None,
    file_type: Annotated[
        str | None,
        Field(alias="type", description='File type to search, e.g. "py", "js", "ts", "go", "rust"'),
    ] = None,
    head_limit: Annotated[
        int | None,
        Field(ge=1, description="Return at most this many output lines / files"),
    ] = None,
    multiline: Annotated[
        bool, Field(description="Let the pattern span lines ('.' also matches newlines)")
    ] = False,
) -> str:
    """Search file contents in the workspace with a regular expression.

    Uses Python `re` syntax (e.g. "def \\w+\\(", "TODO|FIXME"). Filter files with glob or
    type. Binary files and .git / node_modules / .venv / cache directories are skipped.
    """
    flags = (re.IGNORECASE if case_insensitive else 0) | (
        re.MULTILINE | re.DOTALL if multiline else 0
    )
    try:
        rx = re.compile(pattern, flags)
    except re.error as exc:
        raise ToolError(f"invalid regular expression {pattern!r}: {exc}") from None
    types: tuple[str, ...] = ()
    if file_type:
        types = _TYPES.get(file_type.lower(), (f"*.{file_type}",))
    q = _Query(rx, multiline, tuple(expand_braces(glob)) if glob else (), types)
    root = workspace_root(ctx)
    base = resolve_in_workspace(ctx, path or ".")
    if not base.exists():
        raise ToolError(f"path does not exist: {path}")
    stop = threading.Event()
    try:
        hits = await asyncio.to_thread(_search, base, root, q, stop, output_mode == "content")
    finally:
        stop.set()  # a cancelled search stops walking at its next file
    if not hits:
        return "No matches found"
    if output_mode == "files_with_matches":
        hits.sort(key=lambda h: (-_mtime(h.path), str(h.path)))
        names = [display_path(h.path, root) for h in hits]
        return f"Found {len(names)} files\n" + _cap(names, head_limit or GLOB_LIMIT, "files")
    if output_mode == "count":
        counts = [f"{display_path(h.path, root)}:{len(h.matched)}" for h in hits]
        return _cap(counts, head_limit or GREP_LINE_LIMIT, "files")
    b = before if before is not None else (context or 0)
    a = after if after is not None else (context or 0)
    lines: list[str] = []
    for h in hits:
        lines.extend(_content_lines(h, display_path(h.path, root), b, a, line_numbers))
    return _cap(lines, head_limit or GREP_LINE_LIMIT, "lines")


def search_tools() -> list[Tool]:
    """``Glob`` and ``Grep``."""
    return [glob_tool, grep_tool]
