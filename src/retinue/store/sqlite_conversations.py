"""The SQLite :class:`~retinue.store.conversations.ConversationStore`: in the memory database.

A conversation is a row of ``conversations`` (title, message count, times) and one row of
``conversation_messages`` per message (its :func:`~retinue.messages.to_dict` JSON), written
in one transaction with the store's connection and lock (see :mod:`retinue.store.sqlite`).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from retinue.errors import MemoryStoreError
from retinue.messages import Message, from_dict, to_dict
from retinue.store.conversations import (
    ConversationSummary,
    approvals_json,
    parse_approvals,
    title_of,
)
from retinue.store.media import MediaStore, references, restore, stash
from retinue.store.plumbing import SQLiteRead, SQLiteTx
from retinue.store.text import storable

__all__ = ["SQLiteConversations"]


class SQLiteConversations:
    """Conversations in the memory database; built by :class:`~retinue.store.sqlite.SQLiteStore`
    with its write transaction (``tx``) and its locked reader (``read``). With ``media``,
    the images and PDFs of messages are kept there, the rows holding references (see
    :mod:`retinue.store.media`)."""

    def __init__(self, tx: SQLiteTx, read: SQLiteRead, media: MediaStore | None = None) -> None:
        self._tx = tx
        self._read = read
        self.media = media

    async def load(self, tenant: str, cid: str) -> list[Message] | None:
        return await asyncio.to_thread(self._load, tenant, cid)

    def _load(self, tenant: str, cid: str) -> list[Message] | None:
        rows = self._read(  # one statement: one consistent snapshot
            "SELECT m.body FROM conversations c LEFT JOIN conversation_messages m "
            "ON m.tenant = c.tenant AND m.conversation = c.id "
            "WHERE c.tenant = ? AND c.id = ? ORDER BY m.seq",
            (tenant, cid),
        )
        if not rows:
            return None
        try:
            return [from_dict(self._restored(body)) for (body,) in rows if body is not None]
        except (ValueError, KeyError, TypeError) as exc:
            raise MemoryStoreError(f"stored conversation {cid!r} is damaged: {exc}") from None

    async def save(
        self,
        tenant: str,
        cid: str,
        messages: Sequence[Message],
        *,
        keep: int = 0,
        approvals: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        pending = approvals_json(approvals)
        await asyncio.to_thread(self._save, tenant, cid, list(messages), keep, pending)

    async def approvals(self, tenant: str, cid: str) -> list[dict[str, Any]]:
        rows = await asyncio.to_thread(
            self._read,
            "SELECT approvals FROM conversations WHERE tenant = ? AND id = ?",
            (tenant, cid),
        )
        return parse_approvals(rows[0][0]) if rows else []

    def _save(
        self, tenant: str, cid: str, messages: list[Message], keep: int, approvals: str
    ) -> None:
        now, title = time.time(), storable(title_of(messages))
        with self._tx() as conn:
            stored = conn.execute(
                "SELECT count(*) FROM conversation_messages WHERE tenant = ? AND conversation = ?",
                (tenant, cid),
            ).fetchone()[0]
            keep = max(0, min(keep, stored, len(messages)))
            conn.execute(
                "DELETE FROM conversation_messages "
                "WHERE tenant = ? AND conversation = ? AND seq >= ?",
                (tenant, cid, keep),
            )
            conn.executemany(
                "INSERT INTO conversation_messages (tenant, conversation, seq, body) "
                "VALUES (?, ?, ?, ?)",
                _rows(tenant, cid, messages, keep, self._body),
            )
            conn.execute(
                "INSERT INTO conversations "
                "(tenant, id, title, message_count, created_at, updated_at, approvals) "
                "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant, id) DO UPDATE SET "
                "title = excluded.title, message_count = excluded.message_count, "
                "updated_at = excluded.updated_at, approvals = excluded.approvals",
                (tenant, cid, title, len(messages), now, now, storable(approvals)),
            )

    async def summaries(self, tenant: str, limit: int = 1000) -> list[ConversationSummary]:
        rows = await asyncio.to_thread(
            self._read,
            "SELECT id, title, message_count, created_at, updated_at FROM conversations "
            "WHERE tenant = ? ORDER BY updated_at DESC, id LIMIT ?",
            (tenant, max(0, limit)),
        )
        return [ConversationSummary(*row) for row in rows]

    async def delete(self, tenant: str, cid: str) -> bool:
        return await asyncio.to_thread(self._delete, tenant, cid)

    def _delete(self, tenant: str, cid: str) -> bool:
        with self._tx() as conn:
            held = self._media_of(conn, "tenant = ? AND conversation = ?", (tenant, cid))
            conn.execute(
                "DELETE FROM conversation_messages WHERE tenant = ? AND conversation = ?",
                (tenant, cid),
            )
            gone = conn.execute(
                "DELETE FROM conversations WHERE tenant = ? AND id = ?", (tenant, cid)
            ).rowcount
            self._discard(conn, held)
        return gone > 0

    async def prune(self, older_than: float) -> int:
        return await asyncio.to_thread(self._prune, older_than)

    def _prune(self, older_than: float) -> int:
        with self._tx() as conn:
            conn.execute(
                "DELETE FROM conversation_messages WHERE (tenant, conversation) IN "
                "(SELECT tenant, id FROM conversations WHERE updated_at < ?)",
                (older_than,),
            )
            pruned = conn.execute(
                "DELETE FROM conversations WHERE updated_at < ?", (older_than,)
            ).rowcount
            self._sweep(conn)
            return pruned

    # -- media (images and PDFs out of the rows: retinue.store.media) ----------------

    async def check_media_room(self, size: int) -> None:
        if self.media is not None:
            await asyncio.to_thread(self.media.check_room, size)

    def _body(self, message: Message) -> dict[str, Any]:
        return to_dict(message) if self.media is None else stash(message, self.media.put)

    def _restored(self, body: str) -> dict[str, Any]:
        row = json.loads(body)
        return row if self.media is None else restore(row, self.media.get)

    def _media_of(self, conn: sqlite3.Connection, where: str, args: tuple[object, ...]) -> set[str]:
        if self.media is None:
            return set()
        rows = conn.execute(
            f"SELECT body FROM conversation_messages WHERE {where} AND instr(body, '\"sha256\"')",
            args,
        )
        return {d for (body,) in rows for d in references(body)}

    def _discard(self, conn: sqlite3.Connection, digests: set[str]) -> None:
        """Remove the files of ``digests`` no remaining row references (in the transaction
        that deleted their rows, so no save can reference them meanwhile)."""
        if self.media is None or not digests:
            return

        def used(digest: str) -> bool:
            found = conn.execute(
                "SELECT 1 FROM conversation_messages WHERE instr(body, ?) LIMIT 1",
                (f'"{digest}"',),
            )
            return found.fetchone() is not None

        self.media.discard(digests, used)

    def _sweep(self, conn: sqlite3.Connection) -> None:
        """Remove every media file no row references (orphans of rewritten histories)."""
        if self.media is not None:
            self.media.sweep(self._media_of(conn, "1", ()))


def _rows(
    tenant: str,
    cid: str,
    messages: list[Message],
    start: int,
    row: Callable[[Message], dict[str, Any]] = to_dict,
) -> Iterator[tuple[str, str, int, str]]:
    for seq in range(start, len(messages)):
        body = storable(json.dumps(row(messages[seq]), ensure_ascii=False))
        yield tenant, cid, seq, body
