"""The files a parent hands a sub-agent by reference (``SubAgent(files=[...])``).

Each entry is either the name of an image or PDF attached earlier in the parent's own
conversation (a user message's or a tool result's part, the latest of that name), or a
workspace path, read as a ``Read`` call of the parent's, through its gate (the same permission
rules, hooks, guards and approvals, the same confinement to the workspace, symlink checks,
size and page limits: it *is* a ``Read`` call). An image or PDF becomes a part of the
sub-agent's message; a text file is handed over as ``Read`` showed it, after the task's text
(at most :data:`MAX_HANDED_TEXT` characters in all).
An agent without the ``Read`` tool hands over only what was attached (its tool list is its
reach). Whatever cannot be handed over (missing, binary, too large, outside the workspace)
is one :class:`~retinue.errors.ToolError` naming the entry, before any sub-agent starts.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from retinue.engine.session import current_session
from retinue.errors import ToolError
from retinue.messages import MediaPart, Message, ToolCall, ToolResultMessage, UserMessage
from retinue.tools.base import ToolContext, ToolRegistry
from retinue.tools.builtin.fs import read_tool

__all__ = ["MAX_HANDED_FILES", "MAX_HANDED_TEXT", "Handed", "attached", "handed_files"]

MAX_HANDED_FILES = 20
"""The most files one ``SubAgent`` call may hand over."""
MAX_HANDED_TEXT = 200_000
"""The most characters of text files one ``SubAgent`` call may hand over, in all."""


@dataclass(frozen=True, slots=True)
class Handed:
    """What a ``SubAgent`` call hands over: images and PDFs as ``parts``, and the text files
    as ``text`` (each under a line naming it, as ``Read`` showed it; empty for none)."""

    parts: tuple[MediaPart, ...] = ()
    text: str = ""

    def task(self, task: str) -> str:
        """``task`` with the text files after it."""
        return f"{task}\n\n{self.text}" if self.text else task


def attached(messages: Sequence[Message], name: str) -> MediaPart | None:
    """The latest image or document called ``name`` in ``messages`` (None if there is none)."""
    for m in reversed(messages):
        if isinstance(m, UserMessage | ToolResultMessage):
            for part in reversed(m.parts):
                if part.name and part.name == name:
                    return part
    return None


async def handed_files(ctx: ToolContext, entries: Sequence[str]) -> Handed:
    """What ``entries`` name, in order; ``ToolError`` for the first that cannot be had."""
    if len(entries) > MAX_HANDED_FILES:
        raise ToolError(f"too many files: {len(entries)} (at most {MAX_HANDED_FILES} a call)")
    session = current_session()
    history = session.messages if session is not None else ()
    reads = session is None or "Read" in session.config.tools  # (a program's own call: it may)
    parts: list[MediaPart] = []
    texts: list[str] = []
    for entry in entries:
        part = attached(history, entry) if entry.strip() else None
        if part is None and not reads:
            raise ToolError(
                f"files: {entry!r} is not a file attached in this conversation, and this agent "
                "has no Read tool, so it cannot hand over workspace files"
            )
        found = part if part is not None else await _from_workspace(ctx, entry)
        if isinstance(found, str):
            texts.append(f"The file {entry}, as Read shows it:\n{found}")
        else:
            parts.append(found)
    text = "\n\n".join(texts)
    if len(text) > MAX_HANDED_TEXT:
        raise ToolError(
            f"files: the text files come to {len(text):,} characters (at most "
            f"{MAX_HANDED_TEXT:,} a call); hand over fewer and let the sub-agent Read the rest"
        )
    return Handed(tuple(parts), text)


async def _from_workspace(ctx: ToolContext, entry: str) -> MediaPart | str:
    """The image or PDF ``entry`` names, or a text file's content as ``Read`` shows it."""
    if not entry.strip():
        raise ToolError("files: an entry is empty; give a workspace path or an attached name")
    call = ToolCall(f"files-{secrets.token_hex(6)}", "Read", json.dumps({"file_path": entry}))
    tools = ToolRegistry([read_tool])
    if ctx.gate is not None:  # asked, hooked and guarded as any Read of the parent's would be
        result = await ctx.gate.execute(tools, call, ctx)
    else:
        result = await tools.execute(call, ctx)
    if result.is_error:
        raise ToolError(
            f"files: cannot hand over {entry!r} (a file of the workspace, or the name of an "
            f"image or PDF attached in this conversation): {result.content}"
        )
    found = result.parts
    if len(found) == 1:
        return found[0]
    return result.content  # a text file (an empty one says so)
