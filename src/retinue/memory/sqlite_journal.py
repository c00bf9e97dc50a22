"""Deprecated alias of :mod:`retinue.store.sqlite_journal` (moved there, issue 42).

Import from the new module: this alias goes in the next release.
"""

from retinue.store.sqlite_journal import SQLiteJournal

__all__ = ["SQLiteJournal"]
