"""The PostgreSQL :class:`~retinue.store.journal.SessionJournal`: in the memory database.

The tables mirror the SQLite journal's: ``session_records`` and one ``session_messages`` row
per message. Every operation is **one statement** (one round trip, its own transaction in
autocommit), with data-modifying CTEs where it writes two tables:

* :meth:`PgJournal.record` locks the session's record row (``FOR UPDATE``: a concurrent
  record of the same session waits, and then reads the count it committed), upserts the
  tail ``messages[keep:]`` (sent as one ``text[]``), drops rows past the new end and upserts
  the record. Should fewer messages be stored than ``keep`` says, it writes nothing and
  answers how many are stored, and a second statement writes from there (rare).
* A load reads the record and its first ``message_count`` messages in one join: rows a
  shorter history left behind are never read.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, LiteralString

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
from retinue.store.plumbing import PgConnects

if TYPE_CHECKING:
    pass

__all__ = ["PgJournal"]


_RECORD: LiteralString = """
WITH prev AS (
    SELECT message_count FROM session_records
    WHERE tenant = %(tenant)s AND id = %(id)s FOR UPDATE
), stored AS (
    SELECT coalesce((SELECT message_count FROM prev), 0) AS n
), ok AS (
    SELECT n >= %(keep)s AS ok FROM stored
), put AS (
    INSERT INTO session_messages (tenant, session, seq, body)
    SELECT %(tenant)s, %(id)s, %(keep)s + m.o - 1, m.b
    FROM unnest(%(bodies)b::text[]) WITH ORDINALITY AS m(b, o)
    WHERE (SELECT ok FROM ok)
    ON CONFLICT (tenant, session, seq) DO UPDATE SET body = excluded.body
), cut AS (
    DELETE FROM session_messages
    WHERE tenant = %(tenant)s AND session = %(id)s AND seq >= %(n)s AND (SELECT ok FROM ok)
), upsert AS (
INSERT INTO session_records (tenant, id, root, parent_id, depth, kind, role, instance, state,
    message_count, data, updated_at)
SELECT %(tenant)s, %(id)s, %(root)s, %(parent)s::text, %(depth)s, %(kind)s, %(role)s,
    %(instance)s::text, %(state)s, %(n)s, %(data)s, %(now)s
WHERE (SELECT ok FROM ok)
ON CONFLICT (tenant, id) DO UPDATE SET root = excluded.root, parent_id = excluded.parent_id,
    depth = excluded.depth, kind = excluded.kind, role = excluded.role,
    instance = excluded.instance, state = excluded.state,
    message_count = excluded.message_count, data = excluded.data,
    updated_at = excluded.updated_at
)
SELECT ok, n FROM ok, stored
"""

_R: LiteralString = ", ".join(f"r.{c}" for c in RECORD_COLUMNS.split(", "))
_WITH_HISTORY: LiteralString = (
    f"SELECT {_R}, m.body FROM session_records r LEFT JOIN session_messages m "
    "ON m.tenant = r.tenant AND m.session = r.id AND m.seq < r.message_count "
)

# Remove the records chosen by ``gone`` (a DELETE … RETURNING tenant, id) and their
# histories; the statement answers how many records went.
_FORGET: LiteralString = """
, gone_messages AS (
    DELETE FROM session_messages m USING gone
    WHERE m.tenant = gone.tenant AND m.session = gone.id
)
SELECT count(*) FROM gone
"""


class PgJournal:
    """Durable sessions in a :class:`~retinue.store.postgres.PostgresStore`'s database."""

    def __init__(self, store: PgConnects) -> None:
        self.store = store

    async def record(
        self, tenant: str, rec: SessionRecord, messages: Sequence[Message], *, keep: int = 0
    ) -> None:
        n = len(messages)
        keep = max(0, min(keep, n))
        params: dict[str, Any] = {
            "tenant": tenant,
            "id": rec.id,
            "root": rec.root,
            "parent": rec.parent_id,
            "depth": depth_of(rec.id),
            "kind": rec.kind,
            "role": rec.role,
            "instance": rec.instance,
            "state": rec.state,
            "n": n,
            "data": encode_record(rec, n),
            "now": time.time(),
            "keep": keep,
            "bodies": encode_messages(messages, keep),
        }
        async with self.store.connection() as conn:
            row = await (await conn.execute(_RECORD, params)).fetchone()
            if row is not None and not row[0]:  # fewer stored than ``keep``: write from there
                stored = int(row[1])
                bodies = encode_messages(messages, stored)
                await conn.execute(_RECORD, params | {"keep": stored, "bodies": bodies})

    async def load(
        self, tenant: str, session_id: str
    ) -> tuple[SessionRecord, list[Message]] | None:
        found = await self._histories(
            f"{_WITH_HISTORY} WHERE r.tenant = %s AND r.id = %s ORDER BY m.seq",
            (tenant, session_id),
        )
        return found[0] if found else None

    async def load_tree(self, tenant: str, root: str) -> list[tuple[SessionRecord, list[Message]]]:
        return await self._histories(
            f"{_WITH_HISTORY} WHERE r.tenant = %s AND r.root = %s ORDER BY r.depth, r.id, m.seq",
            (tenant, root),
        )

    async def _histories(
        self, sql: LiteralString, params: Sequence[object]
    ) -> list[tuple[SessionRecord, list[Message]]]:
        async with self.store.connection() as conn:
            cur = await conn.execute(sql, params)
            rows = await cur.fetchall()
        return group_rows(rows)

    async def forget(self, tenant: str, session_id: str) -> bool:
        return (
            await self._count(
                "WITH gone AS (DELETE FROM session_records WHERE tenant = %s AND id = %s "
                f"RETURNING tenant, id) {_FORGET}",
                (tenant, session_id),
            )
            > 0
        )

    async def forget_tree(self, tenant: str, root: str) -> int:
        return await self._count(
            "WITH gone AS (DELETE FROM session_records WHERE tenant = %s AND root = %s "
            f"RETURNING tenant, id) {_FORGET}",
            (tenant, root),
        )

    async def prune(self, older_than: float) -> int:
        return await self._count(
            "WITH old AS (SELECT tenant, root FROM session_records GROUP BY tenant, root "
            "HAVING max(updated_at) < %s), gone AS (DELETE FROM session_records r USING old "
            "WHERE r.tenant = old.tenant AND r.root = old.root RETURNING r.tenant, r.id) "
            f"{_FORGET}",
            (older_than,),
        )

    async def consolidated(self, run_id: str) -> bool:
        return await self._count("SELECT count(*) FROM consolidations WHERE run_id = %s",
                                 (run_id,)) > 0  # fmt: skip

    async def _count(self, sql: LiteralString, params: Sequence[object]) -> int:
        async with self.store.connection() as conn:
            row = await (await conn.execute(sql, params)).fetchone()
        return int(row[0]) if row else 0

    async def records(self, tenant: str | None = None, limit: int = 1000) -> list[SessionRecord]:
        async with self.store.connection() as conn:
            cur = await conn.execute(
                f"SELECT {RECORD_COLUMNS} FROM session_records "
                "WHERE %(tenant)s::text IS NULL OR tenant = %(tenant)s "
                "ORDER BY updated_at DESC, tenant, id LIMIT %(limit)s",
                {"tenant": tenant, "limit": max(0, limit)},
            )
            rows = await cur.fetchall()
        return decode_records(rows)

    async def stale(self, older_than: float, limit: int = 100) -> list[tuple[str, str]]:
        async with self.store.connection() as conn:
            cur = await conn.execute(
                "SELECT tenant, root FROM session_records "
                f"WHERE state IN {IN_FLIGHT} AND updated_at < %s "
                "GROUP BY tenant, root ORDER BY min(updated_at) LIMIT %s",
                (older_than, max(0, limit)),
            )
            rows = await cur.fetchall()
        return [(str(t), str(r)) for t, r in rows]
