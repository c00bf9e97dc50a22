"""Search tools named and shaped as Claude Code's: ``Glob`` (file names) and ``Grep``
(file contents, ripgrep's regular expressions).

Both stay inside the workspace: ``Glob`` walks folders through directory file descriptors
from the workspace root (:func:`retinue.tools.builtin._fsafe.walk`), never follows a
symlink, and only lists regular files, so a FIFO cannot make it wait; it walks in a worker
thread, refuses ``..`` in a pattern, and stops after :data:`GLOB_SCAN_LIMIT` entries.
``Grep`` runs ripgrep's ``rg`` from the ``ripgrep`` wheel in a process killed after
:data:`GREP_TIMEOUT_S` seconds (:mod:`retinue.tools.builtin._ripgrep` says how the
confinement, symlink, FIFO, rule and size guarantees are kept); it skips binary files,
files over 10 MB, hard-linked files, what ``.gitignore`` lists, and version-control /
dependency / cache directories. What the Bash sandbox hides or the rules keep from either
tool is left out (:func:`retinue.tools.builtin.reach.search_filter`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import stat
from asyncio.subprocess import Process
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field

from retinue.errors import ToolError
from retinue.tools.base import Tool, ToolContext, tool
from retinue.tools.builtin._fsafe import open_dir, open_regular, read_head, walk
from retinue.tools.builtin._ripgrep import (
    MAX_FILE_BYTES,
    OUTPUT_CAP,
    Query,
    Result,
    error_text,
    rg_argv,
    rg_binary,
    shape,
    walled,
)
from retinue.tools.builtin.globs import glob_regex as shared_glob_regex
from retinue.tools.builtin.pathrules import PathFilter, left_out_note
from retinue.tools.builtin.reach import Reach, search_filter
from retinue.tools.builtin.workspace import Target, locate

__all__ = [
    "GLOB_LIMIT",
    "GLOB_SCAN_LIMIT",
    "GREP_LINE_LIMIT",
    "GREP_TIMEOUT_S",
    "expand_braces",
    "glob_regex",
    "glob_tool",
    "grep_tool",
    "search_tools",
]

GLOB_LIMIT = 100
"""Most paths ``Glob`` (and ``Grep`` in files mode) lists unless told otherwise."""
GLOB_SCAN_LIMIT = 200_000
"""Most directory entries one ``Glob`` looks at."""
GREP_LINE_LIMIT = 250
"""Most output lines ``Grep`` returns in content / count mode unless ``head_limit`` says."""
GREP_TIMEOUT_S = 30.0
"""Seconds a ``Grep`` may run before its process is killed."""
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
_BY_FD = os.path.isdir("/proc/self/fd")
_TYPE_NAME = re.compile(r"[A-Za-z0-9_+-]{1,32}")


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


def glob_regex(pattern: str) -> tuple[re.Pattern[str], int]:
    """A relative glob as a regex over ``/``-joined paths, and how deep it may reach (-1: any).

    The dialect every path pattern shares (:mod:`retinue.tools.builtin.globs`); ``..`` is
    refused.
    """
    parts = [p for p in pattern.split("/") if p not in ("", ".")]
    if any(".." in alt.split("/") for alt in expand_braces(pattern)):
        raise ToolError("glob patterns may not contain '..'; give path= to choose the folder")
    if not parts:
        raise ToolError(f"invalid glob pattern {pattern!r}")
    depth = -1 if "**" in pattern else pattern.count("/")  # (at most: braces may hold a /)
    return re.compile(shared_glob_regex("/".join(parts))), depth


def _split_absolute(ctx: ToolContext, pattern: str, base: Target) -> tuple[Target, str]:
    """An absolute pattern becomes (its literal leading directory, the rest)."""
    if not os.path.isabs(pattern):
        return base, pattern
    parts = Path(pattern).parts
    cut = next((i for i, p in enumerate(parts) if _GLOB_CHARS.search(p)), len(parts) - 1)
    literal = os.path.join(*parts[:cut]) if cut else os.sep
    return locate(ctx, literal), "/".join(parts[cut:])


def _glob_files(base: Target, pattern: str, hidden: PathFilter) -> tuple[list[str], int, bool, int]:
    """Matching regular files (newest first), how many, whether the walk was cut short, and
    how many matching files ``hidden`` left out."""
    rx, depth = glob_regex(pattern)
    found: list[tuple[float, str]] = []
    seen = left_out = 0
    for rel, names, dir_fd in walk(base.root, base.parts, depth=depth):
        seen += len(names) + 1
        if seen > GLOB_SCAN_LIMIT:
            break
        for name in names:
            inner = f"{rel}/{name}" if rel else name
            if not rx.fullmatch(inner):
                continue
            try:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            shown = "/".join([*base.parts, inner])
            if hidden.hides(shown):
                left_out += 1
            else:
                found.append((st.st_mtime, shown))
    found.sort(key=lambda mp: (-mp[0], mp[1]))
    return [p for _, p in found], len(found), seen > GLOB_SCAN_LIMIT, left_out


@tool("Glob")
async def glob_tool(
    ctx: ToolContext,
    pattern: Annotated[
        str,
        Field(
            description="Glob pattern the file paths must match: * stands for any part of a "
            "name, ** for any number of folders"
        ),
    ],
    path: Annotated[
        str | None,
        Field(description="Directory to search in (default: the workspace root)"),
    ] = None,
) -> str:
    """Find files by name pattern in the workspace.

    Supports `**` (any depth), `*`, `?`, `[abc]` and `{a,b}`. Returns matching file paths
    (relative to the workspace), most recently modified first, at most 100. Symlinks are
    not followed.
    """
    base, rel_pattern = _split_absolute(ctx, pattern, locate(ctx, path or "."))
    Reach.of(ctx, "Glob", path or ".").check_hidden(base.real)
    hidden = search_filter(ctx, "Glob", path)
    try:
        paths, total, cut, left_out = await asyncio.to_thread(
            _glob_files, base, rel_pattern, hidden
        )
    except FileNotFoundError:
        raise ToolError(f"path does not exist: {path}") from None
    except OSError as exc:
        raise ToolError(f"{path or '.'}: {exc.strerror or type(exc).__name__}") from None
    notes = [f"(stopped after {GLOB_SCAN_LIMIT} entries; use a narrower path)"] if cut else []
    notes += left_out_note(left_out, "Glob")
    if not paths:
        return "\n".join(["No files found", *notes])
    lines = paths[:GLOB_LIMIT]
    if total > GLOB_LIMIT:
        notes.insert(
            0, f"(showing {GLOB_LIMIT} of {total} files; use a more specific path or pattern)"
        )
    return "\n".join([*lines, *notes])


def _cap_note(shown: int, total: int, what: str) -> list[str]:
    if total <= shown:
        return []
    return [f"(output cut at {shown} of {total} {what}; narrow the search or raise head_limit)"]


_Opened = tuple[int | None, int | None]  # (folder, single file) descriptors


def _open_target(base: Target) -> _Opened:
    """The folder to search, or the single regular file (None, None: nothing to search).

    Opened by descriptor without following a symlink; a single file must be a regular file
    with one link, at most 10 MB and not binary, as a file ``rg`` meets while it walks."""
    parent = open_dir(base.root, base.parts[:-1], shown=base.shown)
    if not base.parts:
        return parent, None
    try:
        name = base.parts[-1]
        st = os.stat(name, dir_fd=parent, follow_symlinks=False)
        if stat.S_ISDIR(st.st_mode):
            return open_dir(base.root, base.parts, shown=base.shown), None
        if stat.S_ISLNK(st.st_mode):
            return None, None  # (symlinks are not followed, as while walking)
        fd = open_regular(parent, name, "read", base.shown)
    finally:
        os.close(parent)
    if os.fstat(fd).st_size > MAX_FILE_BYTES or b"\0" in read_head(fd):
        os.close(fd)
        return None, None
    return None, fd


def _kill(proc: Process) -> None:
    """Kill ``proc`` and its process group: bubblewrap's own child too, even one that lost
    its parent before it could arrange to die with it (it would hold the pipes open)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()


async def _drain(stream: asyncio.StreamReader, cap: int, proc: Process) -> tuple[bytes, bool]:
    """Up to ``cap`` bytes of ``stream``; past that ``proc`` is killed (True: cut short)."""
    chunks: list[bytes] = []
    size = 0
    while chunk := await stream.read(1 << 16):
        if size + len(chunk) > cap:
            chunks.append(chunk[: cap - size])
            _kill(proc)
            return b"".join(chunks), True
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks), False


async def _run_rg(
    argv: list[str], cwd: str | None, dir_fd: int | None, file_fd: int | None
) -> tuple[bytes, bool]:
    """Run ``argv`` (``rg``, perhaps walled in) with the folder ``dir_fd`` passed on (or the
    file ``file_fd`` as stdin), killed after ``GREP_TIMEOUT_S`` (or when cancelled); its
    output and whether it was cut short."""
    proc = await asyncio.create_subprocess_exec(
        *argv, cwd=cwd, env={}, pass_fds=() if dir_fd is None else (dir_fd,),
        start_new_session=True,  # (a group of its own, killed whole: _kill)
        stdin=file_fd if file_fd is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    try:
        (out, cut), (err, _) = await asyncio.wait_for(
            asyncio.gather(
                _drain(proc.stdout, OUTPUT_CAP, proc), _drain(proc.stderr, 1 << 16, proc)
            ),
            GREP_TIMEOUT_S,
        )
        await proc.wait()
    except TimeoutError:
        raise ToolError(
            f"Grep stopped after {GREP_TIMEOUT_S:g} s: the folder is too large; narrow path / glob"
        ) from None
    finally:
        _kill(proc)
        with contextlib.suppress(TimeoutError):  # (the rest of its pipes: they close now)
            await asyncio.wait_for(proc.communicate(), 5)
    if not cut and (proc.returncode not in (0, 1, 2) or err.startswith(b"bwrap:")):
        raise ToolError(f"Grep failed: {err.decode(errors='replace').strip()[-300:]}")
    if proc.returncode == 2 and not out and not cut:
        raise ToolError(error_text(argv[argv.index("--regexp") + 1], err))
    return out, cut


async def _search(q: Query, base: Target, hidden: PathFilter) -> Result:
    rg = rg_binary()
    if rg is None:
        raise ToolError(
            "Grep needs ripgrep's rg from the 'ripgrep' Python package (a dependency of "
            "Retinue), which is missing from this environment; reinstall Retinue"
        )
    try:
        dir_fd, file_fd = await asyncio.to_thread(_open_target, base)
    except FileNotFoundError:
        raise ToolError(f"path does not exist: {base.shown}") from None
    except OSError as exc:
        raise ToolError(f"{base.shown}: {exc.strerror or type(exc).__name__}") from None
    if dir_fd is None and file_fd is None:
        return Result()
    try:
        argv = rg_argv(rg, q, "." if file_fd is None else "-")
        cwd = None
        if dir_fd is not None:  # (walled() probes bubblewrap once: not on the loop)
            wall = await asyncio.to_thread(walled, argv, dir_fd, str(base.real))
            by_fd = f"/proc/self/fd/{dir_fd}" if _BY_FD else str(base.real)
            argv, cwd = (wall, None) if wall is not None else (argv, by_fd)
        out, cut = await _run_rg(argv, cwd, dir_fd, file_fd)
        prefix = "/".join(base.parts)
        result = await asyncio.to_thread(shape, q, out, cut, dir_fd, prefix, hidden, prefix)
    finally:
        for fd in (dir_fd, file_fd):
            if fd is not None:
                os.close(fd)
    result.cut = cut
    return result


@tool("Grep")
async def grep_tool(
    ctx: ToolContext,
    pattern: Annotated[
        str,
        Field(description="Regular expression (ripgrep's syntax, as Rust's regex) to search for"),
    ],
    path: Annotated[
        str | None, Field(description="File or directory to search (default: the workspace root)")
    ] = None,
    glob: Annotated[
        str | None,
        Field(description="Only search files whose paths match this glob pattern"),
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
        Field(alias="type", description="Only search files of this type, named by its extension"),
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

    Uses ripgrep's regular expressions (Rust regex syntax: e.g. "def \\w+\\(",
    "TODO|FIXME"; no look-around or backreferences), which match in linear time. Filter
    files with glob or type. Binary files, symlinks, files listed in .gitignore and .git /
    node_modules / .venv / cache directories are skipped. A search that takes longer than
    30 s is stopped.
    """
    if "\0" in pattern:
        raise ToolError("the pattern contains a NUL character")
    types: tuple[str, ...] = ()
    if file_type:
        types = _TYPES.get(file_type.lower(), ())
        if not types and not _TYPE_NAME.fullmatch(file_type):
            raise ToolError(f"unknown file type {file_type[:40]!r}: give an extension, e.g. py")
        types = types or (f"*.{file_type}",)
    base = locate(ctx, path or ".")
    Reach.of(ctx, "Grep", path or ".").check_hidden(base.real)
    b = before if before is not None else (context or 0)
    a = after if after is not None else (context or 0)
    default = GLOB_LIMIT if output_mode == "files_with_matches" else GREP_LINE_LIMIT
    q = Query(
        pattern, case_insensitive, multiline, glob or None, types, output_mode, b, a,
        line_numbers, head_limit or default,
    )  # fmt: skip
    result = await _search(q, base, search_filter(ctx, "Grep", path))
    lines = result.lines
    left_out = left_out_note(result.hidden, "Grep")
    cut = [f"(Grep stopped after {OUTPUT_CAP:,} bytes of results; narrow the search)"]
    if not lines:
        return "\n".join(["No matches found", *(cut if result.cut else []), *left_out])
    what = "lines" if output_mode == "content" else "files"
    lines += _cap_note(len(lines), result.total, what)
    lines += cut if result.cut else []
    if result.refused:
        lines.append(f"({result.refused} non-regular or hard-linked files were skipped)")
    lines += left_out
    if output_mode == "files_with_matches":
        lines.insert(0, f"Found {result.files} files")
    return "\n".join(lines)


def search_tools() -> list[Tool]:
    """``Glob`` and ``Grep``."""
    return [glob_tool, grep_tool]
