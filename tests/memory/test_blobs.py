"""The blob store (content kept by reference for Temporal's payloads) on both stores:
content-addressed, per tenant, written once however often it is put, checked when read; and
its sweep, which removes what went unused past the retention and nothing used since."""

from __future__ import annotations

import math
import sqlite3
import uuid
from pathlib import Path

import pytest

from retinue.errors import MemoryStoreError
from retinue.memory import MemoryBackend
from retinue.store import blobs as blob_module
from retinue.store.blobs import BlobMissing, BlobStore, PgBlobs, SQLiteBlobs, digest_of
from retinue.store.sqlite_schema import MIGRATIONS, migrate

DAY = 86_400.0


def blobs_of(store: MemoryBackend) -> BlobStore:
    found = getattr(store, "blobs", None)
    assert found is not None, f"{type(store).__name__} keeps no blobs"
    return found


async def test_a_blob_reads_back_under_its_tenant_only(store: MemoryBackend) -> None:
    blobs, data = blobs_of(store), f"a large tool result {uuid.uuid4()}".encode() * 1_000
    digest = await blobs.put("acme", data)
    assert digest == digest_of(data)
    assert await blobs.put("acme", data) == digest  # (an activity tried again: one row)
    assert await blobs.get("acme", digest) == data
    with pytest.raises(BlobMissing):
        await blobs.get("other", digest)  # another tenant's reference reads nothing
    with pytest.raises(BlobMissing):
        await blobs.get("acme", digest_of(b"never written"))


async def test_a_reference_that_is_not_a_digest_is_refused(store: MemoryBackend) -> None:
    for odd in ("", "../x", "A" * 64, "0" * 63, "0" * 64 + "'; DROP TABLE blobs; --"):
        with pytest.raises(BlobMissing):
            await blobs_of(store).get("acme", odd)


async def test_content_over_the_limit_is_refused_not_stored(
    store: MemoryBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(blob_module, "MAX_BLOB_BYTES", 1_000)
    blobs, data = blobs_of(store), b"x" * 1_001
    with pytest.raises(MemoryStoreError, match="over 1,000"):
        await blobs.put("acme", data)
    with pytest.raises(BlobMissing):
        await blobs.get("acme", digest_of(data))


class Clock:
    """The time the blob store reads (Unix seconds): long before any real row's."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


async def clocked(store: MemoryBackend) -> tuple[SQLiteBlobs | PgBlobs, Clock]:
    """The store's blobs on a clock of the test's, none kept (PostgreSQL's database is
    shared by the session's tests: its blobs are swept first)."""
    blobs, clock = blobs_of(store), Clock()
    assert isinstance(blobs, SQLiteBlobs | PgBlobs)
    await blobs.prune(math.inf)
    blobs.clock = clock
    return blobs, clock


async def test_the_sweep_removes_what_went_unused_and_keeps_what_was_used(
    store: MemoryBackend,
) -> None:
    blobs, clock = await clocked(store)
    made = (f"{k} {uuid.uuid4()}".encode() * 100 for k in ("read", "again", "unused", "other"))
    read, put_again, unused, other = made
    for tenant, data in (("acme", read), ("acme", put_again), ("acme", unused), ("o", other)):
        await blobs.put(tenant, data)
    clock.now += 10 * DAY
    assert await blobs.get("acme", digest_of(read)) == read  # (a read: in use)
    await blobs.put("acme", put_again)  # (the same bytes again: in use, one row)
    assert await blobs.prune(clock.now - DAY) == 2  # every tenant's
    for tenant, data in (("acme", unused), ("o", other)):
        with pytest.raises(BlobMissing):
            await blobs.get(tenant, digest_of(data))
    assert await blobs.get("acme", digest_of(read)) == read
    assert await blobs.get("acme", digest_of(put_again)) == put_again
    assert await blobs.prune(clock.now - DAY) == 0


async def test_a_workers_sweep_takes_its_own_tenants_blobs(store: MemoryBackend) -> None:
    """Tenants' workers share one database, each with its own retention: one sweeps only
    its tenant's."""
    blobs, clock = await clocked(store)
    mine, theirs = (f"{k} {uuid.uuid4()}".encode() for k in ("mine", "theirs"))
    await blobs.put("acme", mine)
    await blobs.put("other", theirs)
    clock.now += 10 * DAY
    assert await blobs.prune(clock.now - DAY, "acme") == 1
    assert await blobs.get("other", digest_of(theirs)) == theirs
    with pytest.raises(BlobMissing):
        await blobs.get("acme", digest_of(mine))


async def test_a_row_an_older_worker_wrote_is_kept_while_it_is_new(
    store: MemoryBackend, backend: str
) -> None:
    """A worker of before ``used_at`` inserts rows SQLite gives ``used_at`` 0: the sweep
    judges them by ``created_at`` as well, so one in use is not removed the next hour."""
    if backend != "sqlite":
        pytest.skip("SQLite only (PostgreSQL's default for the column is the insert's time)")
    blobs, clock = await clocked(store)
    assert isinstance(blobs, SQLiteBlobs)
    data = f"an old worker's {uuid.uuid4()}".encode()
    await blobs.put("acme", data)
    with blobs._tx() as conn:  # pyright: ignore[reportPrivateUsage]
        conn.execute("UPDATE blobs SET used_at = 0")  # (as that worker's insert leaves it)
    assert await blobs.prune(clock.now - DAY) == 0
    clock.now += 2 * DAY
    assert await blobs.prune(clock.now - DAY) == 1


async def test_a_read_within_the_hour_writes_nothing(store: MemoryBackend) -> None:
    """A read rewrites when the blob was used only if that was over an hour before: the
    sweep may see a blob an hour older than its last use, and reads stay reads."""
    blobs, clock = await clocked(store)
    data = b"read often" * 100
    await blobs.put("acme", data)
    used = clock.now
    clock.now += 1_800
    assert await blobs.get("acme", digest_of(data)) == data
    assert await blobs.prune(used + 1) == 1  # (still its put's time)
    await blobs.put("acme", data)
    clock.now += 3_601
    assert await blobs.get("acme", digest_of(data)) == data
    assert await blobs.prune(clock.now - 1) == 0  # (rewritten now)


async def test_the_sweep_goes_in_batches_until_none_is_left(
    store: MemoryBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(blob_module, "PRUNE_BATCH", 2)
    blobs, clock = await clocked(store)
    digests = [await blobs.put("acme", f"blob {k}".encode()) for k in range(5)]
    assert await blobs.prune(clock.now + 1) == 5
    for digest in digests:
        with pytest.raises(BlobMissing):
            await blobs.get("acme", digest)


def test_blobs_kept_before_the_sweep_count_as_used_now(tmp_path: Path) -> None:
    """SQLite's v10: a database of v9 keeps its blobs, each used as of the upgrade (a blob
    of a conversation in progress is not swept for being old)."""
    with sqlite3.connect(tmp_path / "m.db", isolation_level=None) as conn:
        for script in MIGRATIONS[:9]:
            conn.executescript(script)
        conn.execute("PRAGMA user_version = 9")
        conn.execute("INSERT INTO blobs VALUES ('t', 'd', 1, x'00', 1000.0)")
        before = conn.execute("SELECT (julianday('now') - 2440587.5) * 86400.0").fetchone()[0]
        migrate(conn)
        [(created, used)] = conn.execute("SELECT created_at, used_at FROM blobs").fetchall()
    assert created == 1000.0 and used >= before


async def test_postgres_blobs_kept_before_the_sweep_count_as_used_now(
    store: MemoryBackend, backend: str
) -> None:
    """PostgreSQL's v9, applied again to a database of v8 that keeps a blob."""
    if backend != "postgres":
        pytest.skip("PostgreSQL only (SQLite's is the test above)")
    from retinue.memory import PostgresMemory
    from retinue.store.pg_schema import migrate as pg_migrate

    assert isinstance(store, PostgresMemory)
    blobs, _ = await clocked(store)
    async with store.connection() as conn:
        await conn.execute("DROP INDEX blobs_by_use")
        await conn.execute("ALTER TABLE blobs DROP COLUMN used_at")
        await conn.execute("DELETE FROM retinue_migrations WHERE version = 9")
        await conn.execute("INSERT INTO blobs VALUES ('t', %s, 1, %s, 1000.0)", ("d" * 64, b"0"))
        [(now,)] = await (await conn.execute("SELECT extract(epoch FROM now())")).fetchall()
        await pg_migrate(conn)
        cur = await conn.execute("SELECT created_at, used_at FROM blobs")
        [(created, used)] = await cur.fetchall()
    assert created == 1000.0 and used >= float(now) - 1
    assert await blobs.prune(float(now) - DAY) == 0
