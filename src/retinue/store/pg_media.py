"""Images and PDFs of PostgreSQL's stored conversations, out of the message rows.

The PostgreSQL twin of :mod:`retinue.store.media`: the same references in the rows
(:func:`~retinue.store.media.stash` / :func:`~retinue.store.media.restore`), the bytes in
the table ``conversation_media`` (``sha256`` the key, ``size``, ``data``), which every
worker shares. Each method runs on the conversation store's connection, inside its
transaction; writing and removing media first take one advisory lock, so a part is never
removed while another worker's save references it. The table is capped at ``max_bytes``
(``media_max_bytes``), a save past it refused with a one-line
:class:`~retinue.store.media.MediaStoreFull`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from retinue.errors import MemoryStoreError
from retinue.messages import Message
from retinue.store.media import DEFAULT_MEDIA_MAX_BYTES, references, restore, stash, too_full
from retinue.store.text import pg_text

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = ["PgMedia"]

_LOCK = "retinue:conversation_media"


class PgMedia:
    """The ``conversation_media`` table, at most ``max_bytes`` of parts."""

    def __init__(self, max_bytes: int = DEFAULT_MEDIA_MAX_BYTES) -> None:
        self.max_bytes = max_bytes

    async def bodies(self, conn: AsyncConnection, messages: Sequence[Message]) -> list[str]:
        """The stored rows (JSON text) of ``messages``, their parts' bytes written first."""
        found: dict[str, bytes] = {}

        def put(data: bytes) -> str:
            digest = hashlib.sha256(data).hexdigest()
            found[digest] = data
            return digest

        rows = [pg_text(json.dumps(stash(m, put), ensure_ascii=False)) for m in messages]
        if found:
            await self._write(conn, found)
        return rows

    async def _write(self, conn: AsyncConnection, found: dict[str, bytes]) -> None:
        await _lock(conn)
        cur = await conn.execute(
            "SELECT sha256 FROM conversation_media WHERE sha256 = ANY(%s)", (list(found),)
        )
        have = {str(r[0]) for r in await cur.fetchall()}
        new = [(d, len(b), b) for d, b in found.items() if d not in have]
        if not new:
            return
        await self.check_room(conn, sum(n for _, n, _ in new))
        async with conn.cursor() as c:
            await c.executemany(
                "INSERT INTO conversation_media (sha256, size, data) VALUES (%s, %s, %s) "
                "ON CONFLICT (sha256) DO NOTHING",
                new,
            )

    async def check_room(self, conn: AsyncConnection, size: int) -> None:
        """:class:`~retinue.store.media.MediaStoreFull` unless ``size`` more bytes fit."""
        cur = await conn.execute("SELECT coalesce(sum(size), 0) FROM conversation_media")
        row = await cur.fetchone()
        used = int(row[0]) if row else 0
        if used + size > self.max_bytes:
            raise too_full(used, self.max_bytes, size)

    async def rows(self, conn: AsyncConnection, bodies: Sequence[str]) -> list[dict[str, Any]]:
        """Stored rows back as :func:`~retinue.messages.to_dict` objects, bytes restored."""
        rows = [json.loads(b) for b in bodies]
        wanted = set().union(*(references(b) for b in bodies)) if bodies else set()
        if not wanted:
            return rows
        cur = await conn.execute(
            "SELECT sha256, data FROM conversation_media WHERE sha256 = ANY(%s)", (list(wanted),)
        )
        found = {str(d): bytes(data) for d, data in await cur.fetchall()}

        def get(digest: str) -> bytes:
            data = found.get(digest)
            if data is None or hashlib.sha256(data).hexdigest() != digest:
                raise MemoryStoreError(f"stored media {digest[:12]} is missing or damaged")
            return data

        return [restore(r, get) for r in rows]

    async def held(self, conn: AsyncConnection, tenant: str, cid: str) -> set[str]:
        """The digests the rows of ``cid`` reference."""
        cur = await conn.execute(
            "SELECT body FROM conversation_messages WHERE tenant = %s AND conversation = %s "
            "AND strpos(body, '\"sha256\"') > 0",
            (tenant, cid),
        )
        return {d for (body,) in await cur.fetchall() for d in references(body)}

    async def discard(self, conn: AsyncConnection, digests: set[str]) -> None:
        """Remove the parts of ``digests`` that no row references any more."""
        if not digests:
            return
        await _lock(conn)
        await conn.execute(
            "DELETE FROM conversation_media m WHERE m.sha256 = ANY(%s) AND NOT EXISTS "
            "(SELECT 1 FROM conversation_messages c WHERE strpos(c.body, m.sha256) > 0)",
            (list(digests),),
        )

    async def sweep(self, conn: AsyncConnection) -> None:
        """Remove every part no row references (orphans of rewritten histories)."""
        await _lock(conn)
        cur = await conn.execute(
            "SELECT body FROM conversation_messages WHERE strpos(body, '\"sha256\"') > 0"
        )
        used = {d for (body,) in await cur.fetchall() for d in references(body)}
        await conn.execute(
            "DELETE FROM conversation_media WHERE NOT (sha256 = ANY(%s))", (list(used),)
        )


async def _lock(conn: AsyncConnection) -> None:
    await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 2))", (_LOCK,))
