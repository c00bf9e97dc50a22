"""Which version of each file an agent has seen, so that ``Write`` never replaces a file blind.

``Read``, ``Write`` and ``Edit`` note the file they touched, as its stamp (device, inode, size,
modification time) right after (``Read`` also when it refuses a binary file: the agent knows
what is there); ``Write`` replaces an existing non-empty file only when the agent's last stamp
of it is the file's current one: a file it never read, or one that changed since (a person, a
command or another agent wrote it), is refused with a line that says to read it first, as
Claude Code's ``Write`` does. Kept in memory for the process, keyed by agent id, bounded: the
:data:`MAX_KEPT` most recently touched (agent, file) pairs (a few megabytes at most).
"""

from __future__ import annotations

import os
from collections import OrderedDict

__all__ = ["MAX_KEPT", "Stamp", "last_seen", "note", "stamp"]

MAX_KEPT = 16_384
"""(agent, file) stamps kept; the least recently touched is forgotten first."""

Stamp = tuple[int, int, int, int]
"""A file's device, inode, size and modification time (ns): a version of its content."""

_seen: OrderedDict[tuple[str, str], Stamp] = OrderedDict()


def stamp(st: os.stat_result) -> Stamp:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def note(agent_id: str, path: str, seen: Stamp) -> None:
    """``agent_id`` has just read or written ``path`` (its real path), now at ``seen``."""
    key = (agent_id, path)
    _seen.pop(key, None)
    _seen[key] = seen
    while len(_seen) > MAX_KEPT:
        _seen.popitem(last=False)


def last_seen(agent_id: str, path: str) -> Stamp | None:
    """The stamp ``path`` had when ``agent_id`` last read or wrote it, if it did."""
    return _seen.get((agent_id, path))
