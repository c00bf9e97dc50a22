"""The SQLite :class:`~retinue.store.journal.SessionJournal`: in the memory database.

A session is a row of ``session_records`` and one row of ``session_messages`` per message,
written in one ``BEGIN IMMEDIATE`` transaction with the store's connection and lock (see
:mod:`retinue.store.sqlite`), on a worker thread. A record of a 2-message tail is four
statements: read the stored count, write the two rows, drop rows past the new end (only
when the history got shorter), upsert the record.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from retinue.messages import Message
from retinue.store.journal import (
    IN_FLIGHT,
    RECORD_COLUMNS,
    SessionRecord,
    decode_records,
    depth_of,
    encode_messages,
    encode_record,
    group_rows,
)
from retinue.store.plumbing import SQLiteRead, SQLiteTx

__all__ = ["SQLiteJournal"]


_R = ", ".join(f"r.{c}" for c in RECORD_COLUMNS.split(", "))
# A record with its history: one row per message (NULL body: none), messages past the
# recorded count left out; one statement, so one consistent snapshot.
_WITH_HISTORY = (
    f"SELECT {_R}, m.body FROM session_records r LEFT JOIN session_messages m "
    "ON m.tenant = r.tenant AND m.session = r.id AND m.seq < r.message_count "
)
_OLD_TREE = (  # a record of a tree whose newest record is older than the parameter
    "(tenant, root) IN (SELECT tenant, root FROM session_records "
    "GROUP BY tenant, root HAVING max(updated_at) < ?)"
)


class SQLiteJournal:
    """Durable sessions in the memory database; built by :class:`~retinue.store.sqlite.SQLiteStore`
    with its write transaction (``tx``) and its locked reader (``read``)."""

    def __init__(self, tx: SQLiteTx, read: SQLiteRead) -> None:
        self._tx = tx
        self._read = read

    async def record(
        self, tenant: str, rec: SessionRecord, messages: Sequence[Message], *, keep: int = 0
    ) -> None:
        await asyncio.to_thread(self._record, tenant, rec, messages, keep)

    def _record(
        self, tenant: str, rec: SessionRecord, messages: Sequence[Message], keep: int
    ) -> None:
        n = len(messages)
        data = encode_record(rec, n)
        keep = max(0, min(keep, n))
        bodies = encode_messages(messages, keep)
        with self._tx() as conn:
            row = conn.execute(
                "SELECT message_count FROM session_records WHERE tenant = ? AND id = ?",
                (tenant, rec.id),
            ).fetchone()
            stored = int(row[0]) if row else 0
            if stored < keep:  # fewer stored than the caller thinks: write from there
                keep, bodies = stored, encode_messages(messages, stored)
            conn.executemany(
                "INSERT OR REPLACE INTO session_messages (tenant, session, seq, body) "
                "VALUES (?, ?, ?, ?)",
                [(tenant, rec.id, keep + i, b) for i, b in enumerate(bodies)],
            )
            if stored > n:
                conn.execute(
                    "DELETE FROM session_messages WHERE tenant = ? AND session = ? AND seq >= ?",
                    (tenant, rec.id, n),
                )
            conn.execute(
                "INSERT INTO session_records (tenant, id, root, parent_id, depth, kind, role, "
                "instance, state, message_count, data, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (tenant, id) DO UPDATE SET "
                "root = excluded.root, parent_id = excluded.parent_id, depth = excluded.depth, "
                "kind = excluded.kind, role = excluded.role, instance = excluded.instance, "
                "state = excluded.state, message_count = excluded.message_count, "
                "data = excluded.data, updated_at = excluded.updated_at",
                (
                    tenant,
                    rec.id,
                    rec.root,
                    rec.parent_id,
                    depth_of(rec.id),
                    rec.kind,
                    rec.role,
                    rec.instance,
                    rec.state,
                    n,
                    data,
                    time.time(),
                ),
            )

    async def load(
        self, tenant: str, session_id: str
    ) -> tuple[SessionRecord, list[Message]] | None:
        rows = await asyncio.to_thread(
            self._read,
            f"{_WITH_HISTORY} WHERE r.tenant = ? AND r.id = ? ORDER BY m.seq",
            (tenant, session_id),
        )
        found = group_rows(rows)
        return found[0] if found else None

    async def load_tree(self, tenant: str, root: str) -> list[tuple[SessionRecord, list[Message]]]:
        rows = await asyncio.to_thread(
            self._read,
            f"{_WITH_HISTORY} WHERE r.tenant = ? AND r.root = ? ORDER BY r.depth, r.id, m.seq",
            (tenant, root),
        )
        return group_rows(rows)

    async def forget(self, tenant: str, session_id: str) -> bool:
        return await asyncio.to_thread(self._forget, tenant, "id = ?", session_id) > 0

    async def forget_tree(self, tenant: str, root: str) -> int:
        return await asyncio.to_thread(self._forget, tenant, "root = ?", root)

    def _forget(self, tenant: str, which: str, value: str) -> int:
        with self._tx() as conn:
            conn.execute(
                "DELETE FROM session_messages WHERE tenant = ? AND session IN "
                f"(SELECT id FROM session_records WHERE tenant = ? AND {which})",
                (tenant, tenant, value),
            )
            return conn.execute(
                f"DELETE FROM session_records WHERE tenant = ? AND {which}", (tenant, value)
            ).rowcount

    async def records(self, tenant: str | None = None, limit: int = 1000) -> list[SessionRecord]:
        rows = await asyncio.to_thread(
            self._read,
            f"SELECT {RECORD_COLUMNS} FROM session_records WHERE ? IS NULL OR tenant = ? "
            "ORDER BY updated_at DESC, tenant, id LIMIT ?",
            (tenant, tenant, max(0, limit)),
        )
        return decode_records(rows)

    async def stale(self, older_than: float, limit: int = 100) -> list[tuple[str, str]]:
        rows = await asyncio.to_thread(
            self._read,
            "SELECT tenant, root FROM session_records INDEXED BY session_records_in_flight "
            f"WHERE state IN {IN_FLIGHT} AND updated_at < ? "
            "GROUP BY tenant, root ORDER BY min(updated_at) LIMIT ?",
            (older_than, max(0, limit)),
        )
        return [(str(t), str(r)) for t, r in rows]

    async def consolidated(self, run_id: str) -> bool:
        rows = await asyncio.to_thread(
            self._read, "SELECT 1 FROM consolidations WHERE run_id = ?", (run_id,)
        )
        return bool(rows)

    async def prune(self, older_than: float) -> int:
        return await asyncio.to_thread(self._prune, older_than)

    def _prune(self, older_than: float) -> int:
        with self._tx() as conn:
            conn.execute(
                "DELETE FROM session_messages WHERE (tenant, session) IN (SELECT tenant, id "
                f"FROM session_records WHERE {_OLD_TREE})",
                (older_than,),
            )
            return conn.execute(
                f"DELETE FROM session_records WHERE {_OLD_TREE}", (older_than,)
            ).rowcount
