"""Text rules of memory: when two passages are the same, and how two block edits combine.

:func:`normalize` is the form in which two passages are the same. :func:`merge_lines`
combines a rewrite of a core block with a change made to it meanwhile, line by line, the way
a three-way merge does: lines the rewrite added are added, lines it removed are removed,
every other line of the current text stays. What a database takes at all (:func:`scrub`,
:func:`storable`, :func:`pg_text`) is :mod:`retinue.store.text`'s; the names stay here as a
deprecated alias for one release.
"""

from __future__ import annotations

import re

from retinue.store.text import pg_text, scrub, storable

__all__ = ["merge_lines", "normalize", "pg_text", "scrub", "storable"]

_WORD = re.compile(r"\w+", re.UNICODE)


def normalize(text: str) -> str:
    """Lower-case words only: two passages with the same normal form are duplicates."""
    return " ".join(_WORD.findall(text.lower()))


def merge_lines(base: str, ours: str, current: str) -> str:
    """``ours`` (a rewrite of ``base``) applied on top of ``current`` (``base`` changed since)."""
    base_lines = base.splitlines()
    our_lines = ours.splitlines()
    removed = [line for line in base_lines if line not in our_lines]
    kept = [line for line in current.splitlines() if line not in removed]
    added = [line for line in our_lines if line not in base_lines and line not in kept]
    return "\n".join(kept + added)
