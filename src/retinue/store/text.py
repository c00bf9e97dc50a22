"""What text a database takes: the rules every store applies before it writes.

:func:`scrub` replaces lone UTF-16 surrogates (a model can emit them, and neither UTF-8 files
nor SQLite accept them) so that one bad character never drops a whole write;
:func:`storable` does it for JSON on the hot path (every step of a durable session), and
:func:`pg_text` also replaces NUL, which PostgreSQL refuses.
"""

from __future__ import annotations

import re

__all__ = ["pg_text", "scrub", "storable"]

_SURROGATE = re.compile("[\ud800-\udfff]")


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
