"""``TodoWrite``, named and shaped as Claude Code's: the calling agent's task list.

Each agent (``ToolContext.agent_id``) has one list, replaced whole by every call and kept
as JSON in ``<data_dir>/todos/<agent id, percent-encoded>.json`` with the time it was written
(to a temporary file, then renamed), so that whoever shows a session can read it with
:func:`load_todos` (``retinue sessions``, the chat's ``/sessions`` and the service's session
view do, through :class:`~retinue.subagents.SessionInfo`). The tool's result is the list as
it now stands, which is how the agent reads it back. A list holds at most
:data:`TODO_MAX_ITEMS` items of at most :data:`TODO_MAX_CHARS` characters each.

A list goes with its agent: :func:`forget_todos` when a session ends, and
:func:`forget_todo_tree` when a conversation is deleted (its main agent's list and those of
every sub-agent under it).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import quote

from pydantic import BaseModel, Field, ValidationError

from retinue.config import make_private_dir
from retinue.errors import ToolError
from retinue.tools.base import Tool, ToolContext, tool

__all__ = [
    "TODO_MAX_CHARS",
    "TODO_MAX_ITEMS",
    "TodoItem",
    "forget_todo_tree",
    "forget_todos",
    "format_todos",
    "load_todos",
    "todo_line",
    "todo_path",
    "todo_tools",
    "todo_write_tool",
    "todos_done",
]

TODO_MAX_ITEMS = 100
"""Most items one task list holds."""
TODO_MAX_CHARS = 1000
"""Most characters of one item's text."""
_MARKS = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}


class TodoItem(BaseModel):
    """One task: what to do, and how far it is."""

    content: Annotated[str, Field(min_length=1, max_length=TODO_MAX_CHARS)]
    status: Literal["pending", "in_progress", "completed"] = "pending"
    activeForm: Annotated[str | None, Field(max_length=TODO_MAX_CHARS)] = None
    id: Annotated[str | None, Field(max_length=100)] = None
    priority: Literal["high", "medium", "low"] | None = None


def todo_path(data_dir: Path, agent_id: str) -> Path:
    """Where the list of ``agent_id`` is kept: one file per id (``main/a_b`` and
    ``main/a:b`` are two), named by the percent-encoded id, or a digest of a very long one."""
    name = quote(agent_id, safe="")  # letters, digits, "_.-~" stay; all else is %XX
    if len(name) > 200:  # a lone "%" is in no encoded name: these never meet one
        name = name[:150] + "%" + hashlib.sha256(agent_id.encode()).hexdigest()[:32]
    return data_dir / "todos" / f"{name or '%'}.json"


def forget_todos(data_dir: Path, agent_id: str) -> None:
    """Delete the list of ``agent_id`` (its session ended); nothing if it kept none."""
    with contextlib.suppress(OSError):
        todo_path(data_dir, agent_id).unlink()


def forget_todo_tree(data_dir: Path, root: str) -> int:
    """Delete the lists of ``root`` and of every agent under it (``root/...``); how many."""
    folder = data_dir / "todos"
    own = todo_path(data_dir, root).name
    below = quote(root + "/", safe="")  # what the encoded name of a descendant starts with
    removed = 0
    try:
        names = os.listdir(folder)
    except OSError:
        return 0
    for name in names:
        if name == own or (name.startswith(below) and name.endswith(".json")):
            with contextlib.suppress(OSError):
                (folder / name).unlink()
                removed += 1
    return removed


def load_todos(data_dir: Path, agent_id: str, *, since: float = 0.0) -> list[TodoItem]:
    """The agent's current list: empty when it never wrote one, wrote it before ``since``
    (a Unix time: an earlier session of the same id), or the file is unreadable."""
    try:
        raw = json.loads(todo_path(data_dir, agent_id).read_text(encoding="utf-8"))
        if float(raw["written_at"]) < since:
            return []
        return [TodoItem.model_validate(item) for item in raw["todos"]]
    except (OSError, ValueError, TypeError, KeyError, ValidationError):
        return []


def _save(path: Path, items: list[TodoItem]) -> None:
    make_private_dir(path.parent)  # the data directory's folders are 0700, files 0600
    todos = [item.model_dump(exclude_none=True) for item in items]
    data = {"written_at": time.time(), "todos": todos}
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.stem, suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False, indent=1)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def todo_line(item: TodoItem) -> str:
    """``[x] done``, ``[~] in progress`` or ``[ ] pending``, then the task."""
    return f"{_MARKS[item.status]} {item.content}"


def todos_done(items: Sequence[TodoItem]) -> str:
    """``2 of 5 done``."""
    return f"{sum(i.status == 'completed' for i in items)} of {len(items)} done"


def format_todos(items: list[TodoItem]) -> str:
    """The list as lines ``[x] done``, ``[~] in progress``, ``[ ] pending``."""
    if not items:
        return "(the task list is empty)"
    return f"Task list ({todos_done(items)}):\n" + "\n".join(map(todo_line, items))


@tool("TodoWrite")
async def todo_write_tool(
    ctx: ToolContext,
    todos: Annotated[
        list[TodoItem],
        Field(
            max_length=TODO_MAX_ITEMS,
            description="The whole task list as it should now be (it replaces the old one)",
        ),
    ],
) -> str:
    """Keep a task list for the current work: write it whole, with each task's status.

    Use it for work of several steps: list the steps, mark one in_progress while you do it,
    and completed as soon as it is done. The result shows the list as it now stands.
    """
    if sum(i.status == "in_progress" for i in todos) > 1:
        note = "\n(more than one task is in_progress; keep one at a time where you can)"
    else:
        note = ""
    try:
        await asyncio.to_thread(_save, todo_path(ctx.data_dir, ctx.agent_id), todos)
    except OSError as exc:
        raise ToolError(f"could not save the task list: {exc.strerror or exc}") from None
    return format_todos(todos) + note


def todo_tools() -> list[Tool]:
    """``TodoWrite``."""
    return [todo_write_tool]
