"""Deprecated alias of :mod:`retinue.store.pg_journal` (moved there, issue 42).

Import from the new module: this alias goes in the next release.
"""

from retinue.store.pg_journal import PgJournal

__all__ = ["PgJournal"]
