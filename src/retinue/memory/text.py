"""Text rules of the memory store: what may be stored, and how two block edits combine.

:func:`scrub` replaces lone UTF-16 surrogates (a model can emit them, and neither UTF-8 files
nor SQLite accept them) so that one bad character never drops a whole consolidation
(:func:`pg_text` also replaces NUL, which PostgreSQL refuses); :func:`normalize` is the
form in which two passages are the same.
:func:`merge_lines` combines a rewrite of a core block with a change made to it meanwhile,
line by line, the way a three-way merge does: lines the rewrite added are added, lines it
removed are removed, every other line of the current text stays.
"""

from __future__ import annotations

import re

__all__ = ["merge_lines", "normalize", "pg_text", "scrub", "storable"]

_SURROGATE = re.compile("[\ud800-\udfff]")
_WORD = re.compile(r"\w+", re.UNICODE)


def normalize(text: str) -> str:
    """Lower-case words only: two passages with the same normal form are duplicates."""
    return " ".join(_WORD.findall(text.lower()))


def scrub(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (a Python ``str`` holds code
    points, so any surrogate in it is a lone one)."""
    return _SURROGATE.sub("\ufffd", text)


def storable(text: str) -> str:
    """JSON ``text`` as both stores take it: lone surrogates (a model can emit them; UTF-8
    cannot hold them) replaced. JSON already escapes NUL, which PostgreSQL refuses. Most text
    has none, and is checked at C speed (this runs on every step)."""
    if text.isascii():
        return text
    try:
        text.encode()
    except UnicodeEncodeError:
        return scrub(text)
    return text


def pg_text(text: str) -> str:
    """``text`` as PostgreSQL stores it: lone surrogates and NUL characters replaced."""
    return scrub(text).replace("\x00", "\ufffd")


def merge_lines(base: str, ours: str, current: str) -> str:
    """``ours`` (a rewrite of ``base``) applied on top of ``current`` (``base`` changed since)."""
    base_lines = base.splitlines()
    our_lines = ours.splitlines()
    removed = [line for line in base_lines if line not in our_lines]
    kept = [line for line in current.splitlines() if line not in removed]
    added = [line for line in our_lines if line not in base_lines and line not in kept]
    return "\n".join(kept + added)
