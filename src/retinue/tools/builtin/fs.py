"""File tools named and shaped as Claude Code's: ``Read``, ``Write``, ``Edit``, ``MultiEdit``.

Every path is checked by :func:`locate` and then opened race-free by
:mod:`retinue.tools.builtin._fsafe` (directory descriptors, ``O_NOFOLLOW``, regular files
with one link only); what it may reach (nothing the sandbox hides, nothing the rules keep
from the tool, no protected file through a path that did not name it) is judged again at
that moment, on the path resolved after any approval wait and on the folder really opened
(:mod:`retinue.tools.builtin.reach`). All file I/O runs in a worker thread, and every read
is bounded: Read returns at most :data:`READ_MAX_CHARS` characters and scans at most
:data:`READ_SCAN_BYTES` bytes, Edit refuses files over :data:`EDIT_MAX_BYTES`. Text is UTF-8
(undecodable bytes are replaced when reading); line endings are kept as they are.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Annotated, TypeVar

from pydantic import BaseModel, Field

from retinue.errors import MediaError, ToolError
from retinue.messages import DocumentPart, is_media, media_part, pdf_pages
from retinue.tools.base import Tool, ToolContext, ToolResult, tool
from retinue.tools.builtin._fsafe import OpenMode, open_dir, open_regular, read_head
from retinue.tools.builtin._seen import Stamp, last_seen, note, stamp
from retinue.tools.builtin.reach import Reach, opened
from retinue.tools.builtin.workspace import Target, locate

__all__ = [
    "EDIT_MAX_BYTES",
    "MAX_LINE_CHARS",
    "MULTI_EDIT_MAX",
    "READ_DEFAULT_LIMIT",
    "READ_MAX_CHARS",
    "READ_MEDIA_MAX_BYTES",
    "READ_PDF_MAX_PAGES",
    "READ_SCAN_BYTES",
    "EditStep",
    "edit_tool",
    "file_tools",
    "looks_binary",
    "multi_edit_tool",
    "read_tool",
    "write_tool",
]

READ_DEFAULT_LIMIT = 2000
"""Lines ``Read`` returns when no ``limit`` is given."""
MAX_LINE_CHARS = 2000
"""Longer lines are cut to this many characters by ``Read``."""
READ_MAX_CHARS = 100_000
READ_MEDIA_MAX_BYTES = 5 * 1024 * 1024  # an image or PDF Read returns (Anthropic's image cap)
READ_PDF_MAX_PAGES = 100  # the most pages of a PDF Read returns (the providers' usual cap)
"""Most characters one ``Read`` returns, whatever ``limit`` says."""
READ_SCAN_BYTES = 64 * 1024 * 1024
"""Most bytes one ``Read`` looks at (to skip to ``offset`` and collect its lines)."""
EDIT_MAX_BYTES = 16 * 1024 * 1024
"""Larger files are refused by ``Edit`` (it holds the whole file in memory)."""
MULTI_EDIT_MAX = 100
"""Most edits one ``MultiEdit`` applies."""
_CHUNK = 1 << 16
_KEEP = MAX_LINE_CHARS * 4
T = TypeVar("T")


def looks_binary(head: bytes) -> bool:
    """Whether a file whose first kilobytes are ``head`` looks binary (holds a NUL byte)."""
    return b"\0" in head


def _open(t: Target, mode: OpenMode, reach: Reach) -> int:
    """A descriptor of the file ``t`` names, opened race-free (see ``_fsafe``), once
    ``reach`` allows both the path resolved and the path of the folder really opened."""
    if not t.parts:
        raise ToolError(f"{t.shown} is a directory, not a file")
    reach.check(t.real)
    dir_fd = open_dir(t.root, t.parts[:-1], create=mode in ("create", "new"), shown=t.shown)
    try:
        reach.check(opened(dir_fd, t.parts[-1], t.real))
        return open_regular(dir_fd, t.parts[-1], mode, t.shown)
    finally:
        os.close(dir_fd)


async def _in_thread(file_path: str, fn: Callable[..., T], /, *args: object) -> T:
    """Run blocking file work in a thread; OS errors become messages without outside paths."""
    try:
        return await asyncio.to_thread(fn, *args)
    except FileNotFoundError:
        raise ToolError(f"file does not exist: {file_path}") from None
    except IsADirectoryError:
        raise ToolError(f"{file_path} is a directory; give a file path") from None
    except OSError as exc:
        raise ToolError(f"{file_path}: {exc.strerror or type(exc).__name__}") from None


class _Lines:
    """The lines of a binary file as (first bytes, full length), within a byte budget."""

    def __init__(self, f: IO[bytes], budget: int) -> None:
        self._f = f
        self._budget = budget
        self.cut_short = False

    def __iter__(self) -> Iterator[tuple[bytes, int]]:
        head, length, scanned = b"", 0, 0
        while chunk := self._f.read(_CHUNK):
            scanned += len(chunk)
            pos = 0
            while (nl := chunk.find(b"\n", pos)) >= 0:
                head += chunk[pos : min(nl, pos + _KEEP - len(head))]
                yield head, length + nl - pos
                head, length, pos = b"", 0, nl + 1
            head += chunk[pos : pos + max(_KEEP - len(head), 0)]
            length += len(chunk) - pos
            if scanned >= self._budget:
                self.cut_short = bool(self._f.read(1))
                break
        if (head or length) and not self.cut_short:
            yield head, length


def _cut(head: bytes, length: int) -> str:
    text = head.decode("utf-8", errors="replace").rstrip("\r\n")
    if length <= _KEEP and len(text) <= MAX_LINE_CHARS:
        return text
    total = f"{len(text)} characters" if length <= _KEEP else f"{length} bytes"
    return text[:MAX_LINE_CHARS] + f"... [line truncated, {total}]"


def _read(
    t: Target, reach: Reach, start: int, limit: int
) -> tuple[list[str] | bytes | None, str, Stamp]:
    """Numbered lines from ``start`` (1-based), at most ``limit``, a closing note, and the
    stamp of the file read; an image's or PDF's bytes (at most :data:`READ_MEDIA_MAX_BYTES`,
    else a note of its size); no lines for another binary file."""
    with os.fdopen(_open(t, "read", reach), "rb") as f:
        info = os.fstat(f.fileno())
        seen = stamp(info)
        head = read_head(f.fileno())
        if is_media(head):
            if info.st_size > READ_MEDIA_MAX_BYTES:
                return b"", f"{info.st_size:,} bytes", seen
            return f.read(READ_MEDIA_MAX_BYTES + 1), "", seen
        if looks_binary(head):
            return None, "", seen
        lines, closing = _numbered(f, start, limit)
        return lines, closing, seen


def _media_result(shown: str, data: bytes, size: str) -> ToolResult:
    """An image or PDF Read returns; a one-line refusal when it is too large, has too many
    pages, or is corrupt."""
    if size:
        limit = f"{READ_MEDIA_MAX_BYTES:,}"
        raise ToolError(f"{shown} is too large to show ({size}; images and PDFs up to {limit})")
    try:
        part = media_part(data, name=os.path.basename(shown))
    except MediaError as exc:
        raise ToolError(f"{shown}: {exc}") from None
    pages = pdf_pages(data) if isinstance(part, DocumentPart) else 0
    if pages > READ_PDF_MAX_PAGES:
        raise ToolError(f"{shown} has {pages} pages; Read shows PDFs of up to {READ_PDF_MAX_PAGES}")
    return ToolResult([f"{shown} ({part.media_type}, {len(data):,} bytes)", part])


def _numbered(f: IO[bytes], start: int, limit: int) -> tuple[list[str], str]:
    """Numbered lines of the open text file ``f`` (see :func:`_read`)."""
    out: list[str] = []
    chars = 0
    lines = _Lines(f, READ_SCAN_BYTES)
    for n, (head, length) in enumerate(lines, 1):
        if n < start:
            continue
        if len(out) >= limit or chars >= READ_MAX_CHARS:
            return out, f"(file continues; read more with offset={n})"
        if looks_binary(head):
            return out, f"(line {n} holds binary data (NUL bytes); it and the rest not shown)"
        line = _cut(head, length)
        out.append(f"{n:>6}\t{line}")
        chars += len(line) + 8
    if lines.cut_short:
        mb = READ_SCAN_BYTES // (1024 * 1024)
        return out, f"(stopped after scanning {mb} MB of the file; use Grep to find a place)"
    return out, ""


@tool("Read")
async def read_tool(
    ctx: ToolContext,
    file_path: Annotated[
        str, Field(description="Path of the file to read (relative to the workspace, or absolute)")
    ],
    offset: Annotated[
        int | None,
        Field(ge=0, description="Line number to start reading from (1-based); default 1"),
    ] = None,
    limit: Annotated[
        int | None,
        Field(ge=1, description=f"Number of lines to read; default {READ_DEFAULT_LIMIT}"),
    ] = None,
) -> str | ToolResult:
    """Read a text file, an image or a PDF from the workspace.

    Returns the lines numbered as `cat -n` does (number, tab, line). By default up to 2000
    lines from the start; pass offset and limit to read a long file in parts. Lines longer
    than 2000 characters are truncated. An image (PNG, JPEG, GIF, WebP) or a PDF is
    returned as itself for you to look at. Other binary files and directories are refused.
    """
    start = max(offset or 1, 1)
    t = locate(ctx, file_path)
    reach = Reach.of(ctx, "Read", file_path)
    lines, closing, seen = await _in_thread(
        file_path, _read, t, reach, start, limit or READ_DEFAULT_LIMIT
    )
    _noted(ctx, t, seen)  # (a binary file too: Write may then replace it)
    if isinstance(lines, bytes):
        return _media_result(t.shown, lines, closing)
    if lines is None:
        raise ToolError(f"{t.shown} is a binary file; Read only shows text files")
    if not lines and not closing:
        if start == 1:
            return f"(the file {file_path} exists but is empty)"
        return f"(the file {file_path} has fewer than {start} lines; nothing to show)"
    return "\n".join([*lines, closing] if closing else lines)


@tool("Write")
async def write_tool(
    ctx: ToolContext,
    file_path: Annotated[
        str, Field(description="Path of the file to write (relative to the workspace, or absolute)")
    ],
    content: Annotated[str, Field(description="Every line the file is to hold once written")],
) -> str:
    """Write a file in the workspace, replacing it if it exists (Read it first then).

    Parent directories are created as needed. An existing file is replaced only after this
    agent has read it with Read, and only if it has not changed since. To change part of an
    existing file, prefer Edit.
    """
    t = locate(ctx, file_path)
    data = content.encode("utf-8", errors="replace")
    expected = last_seen(ctx.agent_id, str(t.real))
    reach = Reach.of(ctx, "Write", file_path, edit=True)
    created, seen = await _in_thread(file_path, _write, t, reach, data, "create", expected)
    _noted(ctx, t, seen)
    return f"{'Created' if created else 'Updated'} {t.shown} ({len(data)} bytes)"


def _write(
    t: Target, reach: Reach, data: bytes, mode: OpenMode, expected: Stamp | None
) -> tuple[bool, Stamp]:
    """Replace the file's content with ``data``: whether the file was new, and its stamp now.

    A file with content is replaced only if its stamp is ``expected`` (what the agent saw)."""
    existed = _exists(t)
    try:
        fd = _open(t, mode, reach)
    except FileExistsError:  # mode "new": Edit with an empty old_string
        raise ToolError(
            f"old_string is empty but {t.shown} already exists; give the text to replace, "
            "or use Write to replace the whole file"
        ) from None
    with os.fdopen(fd, "r+b") as f:
        now = os.fstat(fd)
        if now.st_size and stamp(now) != expected:
            raise ToolError(
                f"{t.shown} already exists and "
                + ("you have not read it" if expected is None else "changed since you read it")
                + ": Read it first, then Write the whole new content (or use Edit to change "
                "part of it)"
            )
        f.truncate()
        f.write(data)
        f.flush()
        return not existed, stamp(os.fstat(fd))


def _noted(ctx: ToolContext, t: Target, seen: Stamp) -> None:
    """The calling agent has just seen ``t`` at ``seen`` (see ``_seen``)."""
    note(ctx.agent_id, str(t.real), seen)


def _exists(t: Target) -> bool:
    try:
        return os.path.lexists(t.real)
    except OSError:
        return False


@tool("Edit")
async def edit_tool(
    ctx: ToolContext,
    file_path: Annotated[
        str, Field(description="Path of the file to edit (relative to the workspace, or absolute)")
    ],
    old_string: Annotated[str, Field(description="The exact text to replace")],
    new_string: Annotated[
        str, Field(description="The text to put in its place (must differ from old_string)")
    ],
    replace_all: Annotated[
        bool, Field(description="Replace every occurrence of old_string (default: false)")
    ] = False,
) -> str:
    """Replace exact text in a file of the workspace.

    old_string must occur exactly once in the file (include enough surrounding lines to make
    it unique) unless replace_all is true. Whitespace and indentation must match exactly.
    An empty old_string creates a new file holding new_string.
    """
    if old_string == new_string:
        raise ToolError("old_string and new_string are the same; nothing to change")
    if old_string == "":
        return await _create_by_edit(ctx, file_path, new_string)
    t = locate(ctx, file_path)
    reach = Reach.of(ctx, "Edit", file_path, edit=True)
    [found], seen = await _in_thread(
        file_path, _edit, t, reach, file_path, [(old_string, new_string, replace_all)]
    )
    _noted(ctx, t, seen)
    times = f"{found} occurrences" if found > 1 else "1 occurrence"
    return f"Edited {t.shown}: replaced {times}"


class EditStep(BaseModel):
    """One replacement of a ``MultiEdit``."""

    old_string: Annotated[str, Field(min_length=1, description="The exact text to replace")]
    new_string: Annotated[str, Field(description="The text to put in its place")]
    replace_all: Annotated[
        bool, Field(description="Replace every occurrence of old_string (default: false)")
    ] = False


@tool("MultiEdit")
async def multi_edit_tool(
    ctx: ToolContext,
    file_path: Annotated[
        str, Field(description="Path of the file to edit (relative to the workspace, or absolute)")
    ],
    edits: Annotated[
        list[EditStep],
        Field(min_length=1, max_length=MULTI_EDIT_MAX, description="Edits applied in order"),
    ],
) -> str:
    """Make several replacements in one file of the workspace, all or none.

    Each edit works as Edit does (old_string exact and unique unless replace_all) on the text
    left by the edits before it. If any edit fails, the file is left unchanged.
    """
    steps = [(e.old_string, e.new_string, e.replace_all) for e in edits]
    for n, (old, new, _) in enumerate(steps, 1):
        if old == new:
            raise ToolError(f"edit {n}: old_string and new_string are the same; nothing to change")
    t = locate(ctx, file_path)
    reach = Reach.of(ctx, "MultiEdit", file_path, edit=True)
    counts, seen = await _in_thread(file_path, _edit, t, reach, file_path, steps)
    _noted(ctx, t, seen)
    return f"Edited {t.shown}: {len(steps)} edits, {sum(counts)} replacements"


def _edit(
    t: Target, reach: Reach, file_path: str, steps: Sequence[tuple[str, str, bool]]
) -> tuple[list[int], Stamp]:
    """Apply each ``(old, new, replace_all)`` in order, all or none: the counts replaced, and
    the file's stamp after."""
    with os.fdopen(_open(t, "write", reach), "r+b") as f:
        size = os.fstat(f.fileno()).st_size
        if size > EDIT_MAX_BYTES:
            mb = EDIT_MAX_BYTES // (1024 * 1024)
            raise ToolError(f"{file_path} is {size} bytes; Edit only changes files up to {mb} MB")
        data = f.read(EDIT_MAX_BYTES + 1)
        if looks_binary(data[:8192]):
            raise ToolError(f"{file_path} is a binary file; Edit only changes text files")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(f"{file_path} is not valid UTF-8 text; Edit cannot change it") from None
        counts = []
        for n, (old, new, replace_all) in enumerate(steps, 1):
            where = f"{file_path} (edit {n})" if len(steps) > 1 else file_path
            found = text.count(old)
            if found == 0:
                raise ToolError(f"old_string was not found in {where} (it must match exactly)")
            if found > 1 and not replace_all:
                raise ToolError(
                    f"old_string occurs {found} times in {where}; add surrounding context to "
                    "make it unique, or set replace_all to true"
                )
            text = text.replace(old, new) if replace_all else text.replace(old, new, 1)
            counts.append(found)
        f.seek(0)
        f.write(text.encode("utf-8", errors="replace"))
        f.truncate()
        f.flush()
        return counts, stamp(os.fstat(f.fileno()))


async def _create_by_edit(ctx: ToolContext, file_path: str, content: str) -> str:
    t = locate(ctx, file_path)
    reach = Reach.of(ctx, "Edit", file_path, edit=True)
    data = content.encode("utf-8", errors="replace")
    _created, seen = await _in_thread(file_path, _write, t, reach, data, "new", None)
    _noted(ctx, t, seen)
    return f"Created {t.shown} ({len(data)} bytes)"


def file_tools() -> list[Tool]:
    """``Read``, ``Write``, ``Edit`` and ``MultiEdit``."""
    return [read_tool, write_tool, edit_tool, multi_edit_tool]
