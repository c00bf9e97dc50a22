"""The files a parent hands a sub-agent by reference (``SubAgent(files=[...])``).

Each entry is either the name of an image or PDF attached earlier in the parent's own
conversation (a user message's or a tool result's part, the latest of that name), or a
workspace path, read exactly as the ``Read`` tool reads it (the same confinement to the
workspace, symlink and deny-rule checks, size and page limits: it *is* ``Read``'s own code).
Whatever cannot be handed over (missing, not an image or PDF, too large, outside the
workspace) is one :class:`~retinue.errors.ToolError` naming the entry, before any sub-agent
starts. The parts follow the task's text in the sub-agent's message.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from retinue.engine.session import current_session
from retinue.errors import ToolError
from retinue.messages import MediaPart, Message, ToolResultMessage, UserMessage
from retinue.tools.base import ToolContext
from retinue.tools.builtin.fs import read_tool

__all__ = ["MAX_HANDED_FILES", "attached", "handed_files"]

MAX_HANDED_FILES = 20
"""The most files one ``SubAgent`` call may hand over."""


def attached(messages: Sequence[Message], name: str) -> MediaPart | None:
    """The latest image or document called ``name`` in ``messages`` (None if there is none)."""
    for m in reversed(messages):
        if isinstance(m, UserMessage | ToolResultMessage):
            for part in reversed(m.parts):
                if part.name and part.name == name:
                    return part
    return None


async def handed_files(ctx: ToolContext, entries: Sequence[str]) -> tuple[MediaPart, ...]:
    """The parts ``entries`` name, in order; ``ToolError`` for the first that cannot be had."""
    if len(entries) > MAX_HANDED_FILES:
        raise ToolError(f"too many files: {len(entries)} (at most {MAX_HANDED_FILES} a call)")
    session = current_session()
    history = session.messages if session is not None else ()
    parts: list[MediaPart] = []
    for entry in entries:
        part = attached(history, entry) if entry.strip() else None
        parts.append(part if part is not None else await _from_workspace(ctx, entry))
    return tuple(parts)


async def _from_workspace(ctx: ToolContext, entry: str) -> MediaPart:
    if not entry.strip():
        raise ToolError("files: an entry is empty; give a workspace path or an attached name")
    try:
        _, found = await read_tool.run_call(ctx, json.dumps({"file_path": entry}))
    except ToolError as exc:
        raise ToolError(
            f"files: cannot hand over {entry!r} (an image or PDF of the workspace, or the name "
            f"of one attached in this conversation): {exc}"
        ) from None
    if len(found) != 1:  # Read gave text: a text file (or an empty one)
        raise ToolError(
            f"files: {entry!r} is neither a file attached in this conversation nor an image "
            f"or PDF in the workspace (pass a text file's path in the task instead)"
        )
    return found[0]
