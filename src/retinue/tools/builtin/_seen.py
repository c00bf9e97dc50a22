"""Which version of each file an agent has seen, so that ``Write`` never replaces a file blind.

``Read``, ``Write`` and ``Edit`` note the file they touched, as its stamp (device, inode, size,
modification time) right after; ``Write`` replaces an existing non-empty file only when the
agent's last stamp of it is the file's current one: a file it never read, or one that changed
since (a person, a command or another agent wrote it), is refused with a line that says to
read it first, as Claude Code's ``Write`` does. Kept in memory for the process, bounded: the
most recent :data:`MAX_AGENTS` agents, :data:`MAX_FILES` files each.
"""

from __future__ import annotations

import os
from collections import OrderedDict

__all__ = ["MAX_AGENTS", "MAX_FILES", "Stamp", "last_seen", "note", "stamp"]

MAX_AGENTS = 4096
"""Agents whose stamps are kept (the least recently active is forgotten first)."""
MAX_FILES = 1024
"""Files whose stamps are kept per agent (the least recently touched is forgotten first)."""

Stamp = tuple[int, int, int, int]
"""A file's device, inode, size and modification time (ns): a version of its content."""

_seen: OrderedDict[str, OrderedDict[str, Stamp]] = OrderedDict()


def stamp(st: os.stat_result) -> Stamp:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def note(agent_id: str, path: str, seen: Stamp) -> None:
    """``agent_id`` has just read or written ``path`` (its real path), now at ``seen``."""
    files = _seen.pop(agent_id, None) or OrderedDict()
    files.pop(path, None)
    files[path] = seen
    while len(files) > MAX_FILES:
        files.popitem(last=False)
    _seen[agent_id] = files
    while len(_seen) > MAX_AGENTS:
        _seen.popitem(last=False)


def last_seen(agent_id: str, path: str) -> Stamp | None:
    """The stamp ``path`` had when ``agent_id`` last read or wrote it, if it did."""
    files = _seen.get(agent_id)
    return files.get(path) if files is not None else None
