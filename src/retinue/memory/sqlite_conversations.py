"""Deprecated alias of :mod:`retinue.store.sqlite_conversations` (moved there, issue 42).

Import from the new module: this alias goes in the next release.
"""

from retinue.store.sqlite_conversations import SQLiteConversations

__all__ = ["SQLiteConversations"]
