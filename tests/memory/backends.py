"""Helpers for tests that run against both memory stores (SQLite and PostgreSQL)."""

from __future__ import annotations

import inspect
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from pgserver import PgServer, find_bin_dir
from retinue.memory import MemoryBackend, PostgresMemory, SQLiteMemory, open_store
from retinue.memory.pending import PendingTranscript

_TABLES = (
    "blocks, passages, consolidations, pending_consolidations, conversations, "
    "conversation_messages, conversation_leases, session_records, session_messages, "
    "conversation_media"
)


def start_pg_server() -> tuple[PgServer, str]:
    """A PostgreSQL server for this test session and the URL of a migrated database."""
    import asyncio

    bin_dir = find_bin_dir()
    if bin_dir is None:
        pytest.skip("PostgreSQL is not installed (.ci/run installs Debian's postgresql)")
    server = PgServer(bin_dir).start()
    try:
        url = server.create_database("retinue_test")
        with ThreadPoolExecutor(1) as pool:  # the caller may be inside an event loop
            pool.submit(asyncio.run, _migrate(url)).result()
    except BaseException:
        server.stop()
        raise
    return server, url


async def _migrate(url: str) -> None:
    store = PostgresMemory(url)
    await store.pool()
    await store.aclose()


async def empty_database(url: str) -> None:
    import psycopg

    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(f"TRUNCATE {_TABLES} RESTART IDENTITY")


def make_store(home: Path, url: str | None, **kwargs: Any) -> MemoryBackend:
    """A store in ``home`` (SQLite) or at ``url`` (PostgreSQL)."""
    return open_store(home, url, **kwargs)


async def close(store: MemoryBackend) -> None:
    if isinstance(store, PostgresMemory):
        await store.aclose()
    else:
        store.close()


async def kept(store: MemoryBackend) -> int:
    """How many transcripts wait for a retry (files in ``pending/``, or rows)."""
    if isinstance(store, PostgresMemory):
        return await store.pending.count()
    root = store.pending.root
    return len(list(root.iterdir())) if root.is_dir() else 0


async def ready(store: MemoryBackend, stale_after: float = 3600.0) -> list[PendingTranscript]:
    """The transcripts due for a retry (PostgreSQL claims them)."""
    items = store.pending.ready(stale_after=stale_after)
    return await items if inspect.isawaitable(items) else items


async def write_inflight(store: MemoryBackend, **kwargs: Any) -> Path:
    path = store.pending.write_inflight(**kwargs)
    return await path if inspect.isawaitable(path) else path


async def apply_consolidation(store: MemoryBackend, **kwargs: Any) -> tuple[int, int] | None:
    result = store.apply_consolidation(**kwargs)
    return await result if inspect.isawaitable(result) else result


async def consolidations(store: MemoryBackend) -> int:
    """Rows in the ``consolidations`` table (each applied run once)."""
    if isinstance(store, SQLiteMemory):
        with sqlite3.connect(store.path) as conn:
            return int(conn.execute("SELECT count(*) FROM consolidations").fetchone()[0])
    async with store.connection() as conn:
        row = await (await conn.execute("SELECT count(*) FROM consolidations")).fetchone()
    assert row is not None
    return int(row[0])
