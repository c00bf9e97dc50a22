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
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import time
from typing import Protocol, runtime_checkable

from retinue.errors import MemoryStoreError
from retinue.store.plumbing import PgConnects, SQLiteRead, SQLiteTx

__all__ = ["MAX_BLOB_BYTES", "BlobMissing", "BlobStore", "HoldsBlobs", "PgBlobs", "SQLiteBlobs"]

MAX_BLOB_BYTES = 64 * 2**20
"""The most bytes one blob holds (64 MiB): larger content is refused, not stored."""

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
        """The bytes ``tenant`` stored as ``digest``; :class:`BlobMissing` if it has none."""
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


class SQLiteBlobs:
    """Blobs in the SQLite memory database (the store's connection and lock)."""

    def __init__(self, tx: SQLiteTx, read: SQLiteRead) -> None:
        self._tx = tx
        self._read = read

    async def put(self, tenant: str, data: bytes) -> str:
        return await asyncio.to_thread(self._put, tenant, _sized(data))

    def _put(self, tenant: str, data: bytes) -> str:
        digest = digest_of(data)
        with self._tx() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO blobs (tenant, sha256, size, data, created_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (tenant, digest, len(data), data, time.time()),
            )
        return digest

    async def get(self, tenant: str, digest: str) -> bytes:
        sql = "SELECT data FROM blobs WHERE tenant = ? AND sha256 = ?"
        rows = await asyncio.to_thread(self._read, sql, (tenant, _valid(digest)))
        return _checked(tenant, digest, bytes(rows[0][0]) if rows else None)


class PgBlobs:
    """Blobs in the PostgreSQL memory database, shared by every worker."""

    def __init__(self, db: PgConnects) -> None:
        self._db = db

    async def put(self, tenant: str, data: bytes) -> str:
        digest = digest_of(_sized(data))
        async with self._db.connection() as conn:
            await conn.execute(
                "INSERT INTO blobs (tenant, sha256, size, data, created_at)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                (tenant, digest, len(data), data, time.time()),
            )
        return digest

    async def get(self, tenant: str, digest: str) -> bytes:
        async with self._db.connection() as conn:
            cur = await conn.execute(
                "SELECT data FROM blobs WHERE tenant = %s AND sha256 = %s",
                (tenant, _valid(digest)),
            )
            row = await cur.fetchone()
        return _checked(tenant, digest, bytes(row[0]) if row is not None else None)
