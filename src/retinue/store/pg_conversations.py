"""The PostgreSQL :class:`~retinue.store.conversations.ConversationStore`, and the leases
that let several workers share conversations
(:class:`~retinue.store.leases.ConversationLeases`).

The tables mirror the SQLite store's: ``conversations`` (title, message count, times) and
one ``conversation_messages`` row per message (its :func:`~retinue.messages.to_dict` JSON).
A save takes a transaction-scoped advisory lock on the conversation, so two saves of one
conversation never interleave.

**Leases.** A worker runs a conversation's turn only while it holds the conversation's row
in ``conversation_leases``: its ``owner`` (the worker), a ``token`` (the turn) and an expiry
that the worker renews during a long turn. Taking a lease succeeds when there is none, when
it expired (its worker died), or when it is a *sticky* hold of the same worker (a
``keep_sessions`` conversation whose sessions live in that worker's memory). A worker that
dies mid-turn stops renewing, so the conversation is free again once the lease expires.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from retinue.errors import MemoryStoreError
from retinue.messages import Message, from_dict, to_dict
from retinue.store.conversations import (
    ConversationSummary,
    approvals_json,
    parse_approvals,
    title_of,
)
from retinue.store.leases import LeaseHolder
from retinue.store.pg_media import PgMedia
from retinue.store.plumbing import PgConnects
from retinue.store.text import pg_text

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = ["PgConversations"]


def _body(message: Message) -> str:
    return pg_text(json.dumps(to_dict(message), ensure_ascii=False))


class PgConversations:
    """Conversations and their leases in a :class:`~retinue.store.postgres.PostgresStore`."""

    def __init__(self, store: PgConnects, media: PgMedia | None = None) -> None:
        self.store = store
        self.media = media  # images and PDFs out of the rows (retinue.store.pg_media)

    async def load(self, tenant: str, cid: str) -> list[Message] | None:
        async with self.store.connection() as conn:
            cur = await conn.execute(
                "SELECT 1 FROM conversations WHERE tenant = %s AND id = %s", (tenant, cid)
            )
            if await cur.fetchone() is None:
                return None
            cur = await conn.execute(
                "SELECT body FROM conversation_messages "
                "WHERE tenant = %s AND conversation = %s ORDER BY seq",
                (tenant, cid),
            )
            bodies = [str(body) for (body,) in await cur.fetchall()]
            try:
                return [from_dict(row) for row in await self._rows(conn, bodies)]
            except (ValueError, KeyError, TypeError) as exc:
                raise MemoryStoreError(f"stored conversation {cid!r} is damaged: {exc}") from None

    async def approvals(self, tenant: str, cid: str) -> list[dict[str, Any]]:
        async with self.store.connection() as conn:
            cur = await conn.execute(
                "SELECT approvals FROM conversations WHERE tenant = %s AND id = %s", (tenant, cid)
            )
            row = await cur.fetchone()
        return parse_approvals(row[0]) if row else []

    async def save(
        self,
        tenant: str,
        cid: str,
        messages: Sequence[Message],
        *,
        keep: int = 0,
        approvals: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        messages = list(messages)
        pending = pg_text(approvals_json(approvals))
        now = time.time()
        async with self.store.connection() as conn, conn.transaction():
            await conn.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 1))",
                (f"{len(tenant)}:{tenant}{cid}",),
            )
            cur = await conn.execute(
                "SELECT count(*) FROM conversation_messages "
                "WHERE tenant = %s AND conversation = %s",
                (tenant, cid),
            )
            row = await cur.fetchone()
            keep = max(0, min(keep, int(row[0]) if row else 0, len(messages)))
            await conn.execute(
                "DELETE FROM conversation_messages "
                "WHERE tenant = %s AND conversation = %s AND seq >= %s",
                (tenant, cid, keep),
            )
            bodies = await self._bodies(conn, messages[keep:])
            async with conn.cursor() as c:
                await c.executemany(
                    "INSERT INTO conversation_messages (tenant, conversation, seq, body) "
                    "VALUES (%s, %s, %s, %s)",
                    [(tenant, cid, keep + i, body) for i, body in enumerate(bodies)],
                )
            await conn.execute(
                "INSERT INTO conversations "
                "(tenant, id, title, message_count, created_at, updated_at, approvals) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (tenant, id) DO UPDATE SET "
                "title = excluded.title, message_count = excluded.message_count, "
                "updated_at = excluded.updated_at, approvals = excluded.approvals",
                (tenant, cid, pg_text(title_of(messages)), len(messages), now, now, pending),
            )

    async def summaries(self, tenant: str, limit: int = 1000) -> list[ConversationSummary]:
        async with self.store.connection() as conn:
            cur = await conn.execute(
                "SELECT id, title, message_count, created_at, updated_at FROM conversations "
                "WHERE tenant = %s ORDER BY updated_at DESC, id LIMIT %s",
                (tenant, max(0, limit)),
            )
            rows = await cur.fetchall()
        return [ConversationSummary(*row) for row in rows]

    async def delete(self, tenant: str, cid: str) -> bool:
        async with self.store.connection() as conn, conn.transaction():
            held = await self.media.held(conn, tenant, cid) if self.media else set[str]()
            await conn.execute(
                "DELETE FROM conversation_messages WHERE tenant = %s AND conversation = %s",
                (tenant, cid),
            )
            cur = await conn.execute(
                "DELETE FROM conversations WHERE tenant = %s AND id = %s", (tenant, cid)
            )
            if self.media is not None:
                await self.media.discard(conn, held)
            return cur.rowcount > 0

    async def prune(self, older_than: float) -> int:
        async with self.store.connection() as conn, conn.transaction():
            await conn.execute(
                "DELETE FROM conversation_messages WHERE (tenant, conversation) IN "
                "(SELECT tenant, id FROM conversations WHERE updated_at < %s)",
                (older_than,),
            )
            cur = await conn.execute(
                "DELETE FROM conversations WHERE updated_at < %s", (older_than,)
            )
            if self.media is not None:
                await self.media.sweep(conn)
            return cur.rowcount

    # -- media (images and PDFs out of the rows: retinue.store.pg_media) ---------------

    async def check_media_room(self, size: int) -> None:
        if self.media is not None:
            async with self.store.connection() as conn:
                await self.media.check_room(conn, size)

    async def _bodies(self, conn: AsyncConnection, messages: Sequence[Message]) -> list[str]:
        if self.media is None:
            return [_body(m) for m in messages]
        return await self.media.bodies(conn, messages)

    async def _rows(self, conn: AsyncConnection, bodies: list[str]) -> list[dict[str, Any]]:
        if self.media is None:
            return [json.loads(b) for b in bodies]
        return await self.media.rows(conn, bodies)

    # -- leases -------------------------------------------------------------------------

    async def acquire(
        self, tenant: str, cid: str, owner: str, token: str, ttl: float
    ) -> LeaseHolder | None:
        async with self.store.connection() as conn:
            cur = await conn.execute(
                "INSERT INTO conversation_leases (tenant, id, owner, token, sticky, expires_at) "
                "VALUES (%s, %s, %s, %s, false, now() + make_interval(secs => %s)) "
                "ON CONFLICT (tenant, id) DO UPDATE SET owner = excluded.owner, "
                "token = excluded.token, sticky = false, expires_at = excluded.expires_at "
                "WHERE conversation_leases.expires_at < now() OR (conversation_leases.owner "
                "= excluded.owner AND conversation_leases.token IS NULL) "
                "RETURNING 1",
                (tenant, cid, owner, token, ttl),
            )
            if await cur.fetchone() is not None:
                return None
            cur = await conn.execute(
                "SELECT owner, sticky, extract(epoch FROM expires_at - now()) "
                "FROM conversation_leases WHERE tenant = %s AND id = %s",
                (tenant, cid),
            )
            row = await cur.fetchone()
        if row is None:  # released between the two statements: try again
            return LeaseHolder("", False, 0.0)
        return LeaseHolder(str(row[0]), bool(row[1]), max(0.0, float(row[2])))

    async def renew(self, tenant: str, cid: str, owner: str, token: str, ttl: float) -> bool:
        async with self.store.connection() as conn:
            cur = await conn.execute(
                "UPDATE conversation_leases SET expires_at = now() + make_interval(secs => %s) "
                "WHERE tenant = %s AND id = %s AND owner = %s AND token = %s",
                (ttl, tenant, cid, owner, token),
            )
            return cur.rowcount == 1

    async def release(
        self, tenant: str, cid: str, owner: str, token: str | None, *, hold_for: float = 0.0
    ) -> None:
        mine = "tenant = %s AND id = %s AND owner = %s AND token IS NOT DISTINCT FROM %s"
        async with self.store.connection() as conn:
            if hold_for > 0:
                await conn.execute(
                    "UPDATE conversation_leases SET token = NULL, sticky = true, "
                    f"expires_at = now() + make_interval(secs => %s) WHERE {mine}",
                    (hold_for, tenant, cid, owner, token),
                )
            else:
                await conn.execute(
                    f"DELETE FROM conversation_leases WHERE {mine}", (tenant, cid, owner, token)
                )
