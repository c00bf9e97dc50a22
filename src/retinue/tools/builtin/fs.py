"""File tools named and shaped as Claude Code's: ``Read``, ``Write``, ``Edit``.

Every path goes through :func:`resolve_in_workspace`, so nothing outside the workspace root
is read or written. Text is UTF-8 (undecodable bytes are replaced when reading); line
endings are kept as they are in the file.
"""

from __future__ import annotations

import asyncio
from itertools import islice
from pathlib import Path
from typing import Annotated

from pydantic import Field

from retinue.errors import ToolError
from retinue.tools.base import Tool, ToolContext, tool
from retinue.tools.builtin.workspace import display_path, resolve_in_workspace, workspace_root

__all__ = [
    "MAX_LINE_CHARS",
    "READ_DEFAULT_LIMIT",
    "edit_tool",
    "file_tools",
    "is_binary",
    "read_tool",
    "write_tool",
]

READ_DEFAULT_LIMIT = 2000
"""Lines ``Read`` returns when no ``limit`` is given."""
MAX_LINE_CHARS = 2000
"""Longer lines are cut to this many characters by ``Read``."""
_SNIFF_BYTES = 8192


def is_binary(path: Path) -> bool:
    """Whether the file looks binary (a NUL byte among its first few kilobytes)."""
    with path.open("rb") as f:
        return b"\0" in f.read(_SNIFF_BYTES)


def _existing_file(ctx: ToolContext, file_path: str) -> Path:
    """The resolved path of an existing regular file, or a clear ``ToolError``."""
    path = resolve_in_workspace(ctx, file_path)
    if path.is_dir():
        raise ToolError(
            f"{file_path} is a directory, not a file (use Glob or Bash 'ls' to list it)"
        )
    if not path.exists():
        raise ToolError(f"file does not exist: {file_path}")
    if not path.is_file():
        raise ToolError(f"{file_path} is not a regular file")
    return path


def _cut(line: str) -> str:
    if len(line) <= MAX_LINE_CHARS:
        return line
    return line[:MAX_LINE_CHARS] + f"... [line truncated, {len(line)} characters]"


def _read_lines(path: Path, start: int, limit: int) -> tuple[list[str], bool]:
    """Lines ``start`` (1-based) .. ``start + limit - 1``, and whether more follow."""
    with path.open("r", encoding="utf-8", errors="replace", newline="") as f:
        chunk = list(islice(f, start - 1, start - 1 + limit + 1))
    more = len(chunk) > limit
    return [line.rstrip("\r\n") for line in chunk[:limit]], more


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
) -> str:
    """Read a text file from the workspace.

    Returns the lines numbered as `cat -n` does (number, tab, line). By default up to 2000
    lines from the start; pass offset and limit to read a long file in parts. Lines longer
    than 2000 characters are truncated. Binary files and directories are refused.
    """
    path = _existing_file(ctx, file_path)
    if await asyncio.to_thread(is_binary, path):
        raise ToolError(f"{file_path} is a binary file; Read only shows text files")
    start = max(offset or 1, 1)
    count = limit or READ_DEFAULT_LIMIT
    lines, more = await asyncio.to_thread(_read_lines, path, start, count)
    if not lines:
        if start == 1:
            return f"(the file {file_path} exists but is empty)"
        return f"(the file {file_path} has fewer than {start} lines; nothing to show)"
    body = "\n".join(f"{n:>6}\t{_cut(line)}" for n, line in enumerate(lines, start))
    if more:
        body += f"\n(file continues; read more with offset={start + len(lines)})"
    return body


@tool("Write")
async def write_tool(
    ctx: ToolContext,
    file_path: Annotated[
        str, Field(description="Path of the file to write (relative to the workspace, or absolute)")
    ],
    content: Annotated[str, Field(description="The full content to write to the file")],
) -> str:
    """Write a file in the workspace, replacing it if it exists.

    Parent directories are created as needed. To change part of an existing file, prefer
    Edit.
    """
    path = resolve_in_workspace(ctx, file_path)
    if path.is_dir():
        raise ToolError(f"{file_path} is a directory; give a file path")
    existed = path.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as f:
        f.write(content)
    shown = display_path(path, workspace_root(ctx))
    verb = "Updated" if existed else "Created"
    return f"{verb} {shown} ({len(content.encode())} bytes)"


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
    path = _existing_file(ctx, file_path)
    text = _read_text_for_edit(path, file_path)
    found = text.count(old_string)
    if found == 0:
        raise ToolError(f"old_string was not found in {file_path} (it must match exactly)")
    if found > 1 and not replace_all:
        raise ToolError(
            f"old_string occurs {found} times in {file_path}; add surrounding context to make "
            "it unique, or set replace_all to true"
        )
    updated = (
        text.replace(old_string, new_string)
        if replace_all
        else text.replace(old_string, new_string, 1)
    )
    with path.open("w", encoding="utf-8", newline="") as f:
        f.write(updated)
    shown = display_path(path, workspace_root(ctx))
    times = f"{found} occurrences" if found > 1 else "1 occurrence"
    return f"Edited {shown}: replaced {times}"


def _read_text_for_edit(path: Path, file_path: str) -> str:
    if is_binary(path):
        raise ToolError(f"{file_path} is a binary file; Edit only changes text files")
    try:
        with path.open("r", encoding="utf-8", newline="") as f:
            return f.read()
    except UnicodeDecodeError:
        raise ToolError(f"{file_path} is not valid UTF-8 text; Edit cannot change it") from None


async def _create_by_edit(ctx: ToolContext, file_path: str, content: str) -> str:
    path = resolve_in_workspace(ctx, file_path)
    if path.exists():
        raise ToolError(
            f"old_string is empty but {file_path} already exists; give the text to replace, "
            "or use Write to replace the whole file"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as f:
        f.write(content)
    return f"Created {display_path(path, workspace_root(ctx))} ({len(content.encode())} bytes)"


def file_tools() -> list[Tool]:
    """``Read``, ``Write`` and ``Edit``."""
    return [read_tool, write_tool, edit_tool]
