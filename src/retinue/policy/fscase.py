"""Whether a workspace's file system tells names apart by case (Linux's ext4 does; macOS's
APFS and Windows' NTFS by default do not).

On a file system that ignores case, ``Secrets/key`` and ``secrets/KEY`` are one file, so a
permission rule about a path must match it however a call spells it
(:mod:`retinue.policy.rules`). :func:`ignores_case` probes each workspace once, without
writing anything: the deepest folder of its path whose name has a cased letter is looked up
with that letter's case swapped; the file system ignores case when both spellings are the
same folder. A path with no cased letter at all falls back to the platform's usual file system.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["ignores_case"]

_MAX_KNOWN = 256  # workspaces whose answer is kept
_known: dict[str, bool] = {}


def ignores_case(folder: Path | str) -> bool:
    """Whether the file system ``folder`` is on ignores the case of names (probed once)."""
    key = os.path.abspath(folder)
    found = _known.get(key)
    if found is None:
        if len(_known) >= _MAX_KNOWN:
            _known.clear()
        found = _known[key] = probe(key)
    return found


def probe(folder: str) -> bool:
    """The probe itself (see the module docstring), not cached."""
    path = os.path.abspath(folder)
    while True:
        head, name = os.path.split(path)
        if name and name != name.swapcase():
            try:
                return os.path.samestat(os.stat(path), os.stat(os.path.join(head, name.swapcase())))
            except (OSError, ValueError):  # the other spelling is not there: case counts
                return False
        if not name or head == path:
            return sys.platform in ("darwin", "win32")
        path = head
