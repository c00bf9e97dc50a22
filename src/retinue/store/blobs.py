"""Content kept by reference: what is too large to travel in a Temporal payload.

A Temporal workflow's history holds every activity's input and result, and one payload may
carry 2 MB at most; a tool result of several megabytes, or a conversation's whole history
sent with each model call, would not fit, or would grow the history with the square of the
turns. The activities that produce such content write it here instead and hand on a
reference (:mod:`retinue.temporal.refs`); the activities that need it read it back.

A blob is addressed by the SHA-256 of its bytes and *scoped by tenant*: the key is
``(tenant, sha256)``, so a reference made in one tenant's conversation reads nothing in
another's (the row is not there). Writing is idempotent: the same bytes written twice (an
activity tried again) are one row. Bytes read back are checked against their digest. The
tables live in the memory database beside conversations and transcripts (``blobs`` in
SQLite and PostgreSQL); every worker that shares the database reads what any wrote.

**The sweep** (:meth:`BlobStore.prune`, run by the workers every hour:
:mod:`retinue.temporal.sweep`) removes the blobs nobody used for ``blob_retention_days``
(default 90). Each row says when it was last used (``used_at``): a put writes it, the same
bytes put again rewrite it, and a read rewrites it when it is older than :data:`TOUCH_EVERY`
(an hour; so most reads stay reads). Why no blob in use is removed:

- Every use is a put or a read: the activities hand the workflow a reference only to what
  they have just put, and every model call reads every blob its history names (the stored
  history's chunks and each large message), so does a consolidation; a reader's cache
  (:class:`~retinue.temporal.refs.BlobCache`) keeps bytes an hour at most, then reads them
  again. So a blob used at time *t* has ``used_at`` of *t* minus two hours or later.
- The sweep removes rows whose ``used_at`` is older than the retention, which is a day at
  least (the setting refuses less): never one used within the retention less two hours.
- A put or a read that races the sweep cannot lose: the delete re-checks ``used_at`` on the
  row as it is when it deletes (SQLite: one writer at a time; PostgreSQL: a ``DELETE`` whose
  row was updated meanwhile evaluates its condition again), a put after the delete writes
  the row anew, and a read whose touch finds the row gone reports it missing, not bytes the
  store no longer keeps.
- A row an older worker wrote (before ``used_at``: SQLite gives it 0) is judged by its
  ``created_at`` as well: the sweep removes only rows both used and created before the
  cutoff.
- Each worker sweeps its own tenant's blobs (``prune``'s ``tenant``), by its own setting:
  tenants' workers may keep theirs for different times in one database.

What the retention does not cover, by design: a conversation (or a sub-agent session) that
waits longer than the retention between two model calls. Its next call finds the content
gone, and the model reads a note that says so ("content no longer kept",
:mod:`retinue.temporal.refs`) where the content was; the workflow goes on.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import time
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from retinue.errors import MemoryStoreError
from retinue.store.plumbing import PgConnects, SQLiteRead, SQLiteTx

__all__ = [
    "MAX_BLOB_BYTES",
    "TOUCH_EVERY",
    "BlobMissing",
    "BlobStore",
    "HoldsBlobs",
    "PgBlobs",
    "SQLiteBlobs",
]

MAX_BLOB_BYTES = 64 * 2**20
"""The most bytes one blob holds (64 MiB): larger content is refused, not stored."""

TOUCH_EVERY = 3600.0
"""Seconds a blob's ``used_at`` may lag behind its last read (a read older rewrites it)."""

PRUNE_BATCH = 500
"""Blobs one transaction of the sweep removes at most (the rest in the next ones)."""

_DIGEST = re.compile(r"[0-9a-f]{64}")


class BlobMissing(MemoryStoreError):
    """No blob of that digest in this tenant's store (never written, pruned, or another
    tenant's)."""


class BlobStore(Protocol):
    """Content-addressed bytes, one set per tenant."""

    async def put(self, tenant: str, data: bytes) -> str:
        """Store ``data`` for ``tenant`` (once: the same bytes again are the same row); its
        SHA-256 (hex)."""
        ...

    async def get(self, tenant: str, digest: str) -> bytes:
        """The bytes ``tenant`` stored as ``digest`` (now in use: see the module's sweep);
        :class:`BlobMissing` if it has none."""
        ...

    async def prune(self, older_than: float, tenant: str | None = None) -> int:
        """Remove ``tenant``'s blobs (None: every tenant's) used and created before
        ``older_than`` (Unix seconds); how many were removed."""
        ...


@runtime_checkable
class HoldsBlobs(Protocol):
    """A store that keeps blobs (:class:`~retinue.store.sqlite.SQLiteStore`,
    :class:`~retinue.store.postgres.PostgresStore`, and memory built on them)."""

    @property
    def blobs(self) -> BlobStore: ...


def digest_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _checked(tenant: str, digest: str, data: bytes | None) -> bytes:
    """The bytes read for ``digest``, or the error that says why there are none."""
    if data is None:
        raise BlobMissing(f"no stored content {digest[:12]} for tenant {tenant[:64]!r}")
    if digest_of(data) != digest:
        raise MemoryStoreError(f"stored content {digest[:12]} is damaged")
    return data


def _valid(digest: str) -> str:
    if not _DIGEST.fullmatch(digest):
        raise BlobMissing(f"not a content reference: {digest[:70]!r}")
    return digest


def _sized(data: bytes) -> bytes:
    if len(data) > MAX_BLOB_BYTES:
        raise MemoryStoreError(f"content of {len(data):,} bytes is over {MAX_BLOB_BYTES:,}")
    return data


def _stale(used_at: float, now: float) -> bool:
    """Whether a blob read ``now`` should have its ``used_at`` rewritten."""
    return used_at < now - TOUCH_EVERY


class SQLiteBlobs:
    """Blobs in the SQLite memory database (the store's connection and lock)."""

    def __init__(self, tx: SQLiteTx, read: SQLiteRead) -> None:
        self._tx = tx
        self._read = read
        self.clock: Callable[[], float] = time.time
        """The time it is (Unix seconds): what ``used_at`` is set to."""

    async def put(self, tenant: str, data: bytes) -> str:
        return await asyncio.to_thread(self._put, tenant, _sized(data))

    def _put(self, tenant: str, data: bytes) -> str:
        digest, now = digest_of(data), self.clock()
        with self._tx() as conn:
            conn.execute(
                "INSERT INTO blobs (tenant, sha256, size, data, created_at, used_at)"
                " VALUES (?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (tenant, sha256) DO UPDATE SET used_at = excluded.used_at",
                (tenant, digest, len(data), data, now, now),
            )
        return digest

    async def get(self, tenant: str, digest: str) -> bytes:
        return await asyncio.to_thread(self._get, tenant, _valid(digest))

    def _get(self, tenant: str, digest: str) -> bytes:
        sql = "SELECT data, used_at FROM blobs WHERE tenant = ? AND sha256 = ?"
        rows = self._read(sql, (tenant, digest))
        data, now = (bytes(rows[0][0]) if rows else None), self.clock()
        if rows and _stale(rows[0][1], now) and not self._touch(tenant, digest, now):
            data = None  # (swept since it was read)
        return _checked(tenant, digest, data)

    def _touch(self, tenant: str, digest: str, now: float) -> bool:
        with self._tx() as conn:
            cur = conn.execute(
                "UPDATE blobs SET used_at = ? WHERE tenant = ? AND sha256 = ?",
                (now, tenant, digest),
            )
            return cur.rowcount > 0

    async def prune(self, older_than: float, tenant: str | None = None) -> int:
        return await asyncio.to_thread(self._prune, older_than, tenant)

    def _prune(self, older_than: float, tenant: str | None) -> int:
        removed = 0
        whose, args = ("", ()) if tenant is None else (" AND tenant = ?", (tenant,))
        while True:  # (in batches: the store's lock is not held for one long delete)
            with self._tx() as conn:
                count = conn.execute(
                    "DELETE FROM blobs WHERE rowid IN (SELECT rowid FROM blobs"
                    f" WHERE used_at < ? AND created_at < ?{whose} LIMIT ?)",
                    (older_than, older_than, *args, PRUNE_BATCH),
                ).rowcount
            removed += count
            if count < PRUNE_BATCH:
                return removed


class PgBlobs:
    """Blobs in the PostgreSQL memory database, shared by every worker."""

    def __init__(self, db: PgConnects) -> None:
        self._db = db
        self.clock: Callable[[], float] = time.time
        """The time it is (Unix seconds): what ``used_at`` is set to."""

    async def put(self, tenant: str, data: bytes) -> str:
        digest, now = digest_of(_sized(data)), self.clock()
        async with self._db.connection() as conn:
            await conn.execute(
                "INSERT INTO blobs (tenant, sha256, size, data, created_at, used_at)"
                " VALUES (%s, %s, %s, %s, %s, %s)"
                " ON CONFLICT (tenant, sha256) DO UPDATE SET used_at = excluded.used_at",
                (tenant, digest, len(data), data, now, now),
            )
        return digest

    async def get(self, tenant: str, digest: str) -> bytes:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "SELECT data, used_at FROM blobs WHERE tenant = %s AND sha256 = %s",
                (tenant, _valid(digest)),
            )
            row, now = await cur.fetchone(), self.clock()
            if row is not None and _stale(row[1], now):
                cur = await conn.execute(
                    "UPDATE blobs SET used_at = %s WHERE tenant = %s AND sha256 = %s",
                    (now, tenant, digest),
                )
                row = row if cur.rowcount > 0 else None  # (swept since it was read)
        return _checked(tenant, digest, bytes(row[0]) if row is not None else None)

    async def prune(self, older_than: float, tenant: str | None = None) -> int:
        removed = 0
        whose, args = ("", ()) if tenant is None else (" AND tenant = %s", (tenant,))
        while True:  # (in batches: no one long transaction)
            async with self._db.connection() as conn:
                cur = await conn.execute(
                    "DELETE FROM blobs WHERE (tenant, sha256) IN (SELECT tenant, sha256"
                    f" FROM blobs WHERE used_at < %s AND created_at < %s{whose} LIMIT %s)"
                    " AND used_at < %s",
                    (older_than, older_than, *args, PRUNE_BATCH, older_than),
                )
            removed += cur.rowcount
            if cur.rowcount < PRUNE_BATCH:
                return removed
