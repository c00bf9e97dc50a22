"""``LS``, named and shaped as Claude Code's: the entries of one workspace folder.

The folder is checked by :func:`~retinue.tools.builtin.workspace.locate` and opened through
directory descriptors without following symlinks (:func:`~retinue.tools.builtin._fsafe.open_dir`);
its entries are read with ``lstat`` only, so nothing outside the workspace is looked at.
At most :data:`LS_LIMIT` entries are listed. Entries a Read deny rule (or an ask rule this
call did not match) covers are left out, named by count only, as ``Glob`` and ``Grep`` do,
and so is what the Bash sandbox hides (:func:`~retinue.tools.builtin.reach.search_filter`).
"""

from __future__ import annotations

import asyncio
import os
import re
import stat
from typing import Annotated

from pydantic import Field

from retinue.errors import ToolError
from retinue.tools.base import ToolContext, tool
from retinue.tools.builtin._fsafe import open_dir
from retinue.tools.builtin.globs import glob_regex
from retinue.tools.builtin.pathrules import PathFilter, left_out_note
from retinue.tools.builtin.reach import Reach, search_filter
from retinue.tools.builtin.workspace import Target, locate

__all__ = ["LS_LIMIT", "ls_tool"]

LS_LIMIT = 1000
"""Most entries one ``LS`` lists."""
_MARKS = {stat.S_IFDIR: "/", stat.S_IFLNK: "@", stat.S_IFIFO: "|", stat.S_IFSOCK: "="}


def _entry(name: str, dir_fd: int) -> str:
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return name
    mark = _MARKS.get(stat.S_IFMT(st.st_mode), "")
    size = f"  ({st.st_size} bytes)" if stat.S_ISREG(st.st_mode) else ""
    return f"{name}{mark}{size}"


def _list(t: Target, ignore: list[str], hidden: PathFilter) -> tuple[list[str], int]:
    """The entries' lines, and how many entries ``hidden`` left out."""
    fd = open_dir(t.root, t.parts, shown=t.shown)
    try:
        names = sorted(os.listdir(fd))
        left = re.compile("|".join(f"(?:{glob_regex(p)})" for p in ignore)) if ignore else None
        kept = [n for n in names if left is None or not left.fullmatch(n)]
        shown = [n for n in kept if not hidden.hides("/".join([*t.parts, n]))]
        out = [_entry(n, fd) for n in shown[:LS_LIMIT]]
    finally:
        os.close(fd)
    if len(shown) > LS_LIMIT:
        out.append(f"(… {len(shown) - LS_LIMIT} more entries not shown; use Glob to narrow)")
    return out, len(kept) - len(shown)


@tool("LS")
async def ls_tool(
    ctx: ToolContext,
    path: Annotated[
        str, Field(description="Folder to list (relative to the workspace, or absolute)")
    ] = ".",
    ignore: Annotated[
        list[str] | None,
        Field(max_length=50, description="Glob patterns of entry names to leave out"),
    ] = None,
) -> str:
    """List the entries of a folder in the workspace (one level, sorted).

    Folders end with /, symlinks with @; regular files show their size. Use Glob to find
    files by pattern across folders.
    """
    t = locate(ctx, path)
    Reach.of(ctx, "LS", path).check_hidden(t.real)
    hidden = search_filter(ctx, "LS", path)
    try:
        lines, left_out = await asyncio.to_thread(_list, t, ignore or [], hidden)
    except FileNotFoundError:
        raise ToolError(f"folder does not exist: {path}") from None
    except NotADirectoryError:
        raise ToolError(f"{path} is a file, not a folder (use Read)") from None
    except OSError as exc:
        raise ToolError(f"{path}: {exc.strerror or type(exc).__name__}") from None
    note = left_out_note(left_out, "LS", ("entry", "entries"))
    if not lines:
        return "\n".join([f"(the folder {t.shown} is empty)", *note])
    return "\n".join([f"{t.shown}/", *(f"  {line}" for line in lines), *note])
