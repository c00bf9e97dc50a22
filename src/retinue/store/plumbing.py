"""What the tables of a store need from the database that holds them.

Each PostgreSQL table class (:class:`~retinue.store.pg_conversations.PgConversations`,
:class:`~retinue.store.pg_journal.PgJournal`, ...) is handed the object that owns the
connection pool (a :class:`~retinue.store.postgres.PostgresStore`, or the memory backend
built on it) and asks it for pooled connections only (:class:`PgConnects`). The SQLite ones
are handed the store's write transaction and read functions (:data:`SQLiteTx`,
:data:`SQLiteRead`), which share one connection and its lock.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import TYPE_CHECKING, Protocol, TypeAlias

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = ["PgConnects", "SQLiteRead", "SQLiteTx"]

SQLiteTx: TypeAlias = Callable[[], AbstractContextManager[sqlite3.Connection]]
"""One write transaction (``BEGIN IMMEDIATE``) on the store's connection, under its lock."""

SQLiteRead: TypeAlias = Callable[[str, Sequence[object]], list[tuple]]
"""One read statement and its rows, under the store's lock."""


class PgConnects(Protocol):
    """The store these tables live in: pooled connections (autocommit)."""

    def connection(self) -> AbstractAsyncContextManager[AsyncConnection]: ...
