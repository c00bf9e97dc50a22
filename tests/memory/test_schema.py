"""Schema migrations versioned in code (PRAGMA user_version).

SQLite only (the file and its pragmas); PostgreSQL's migrations table is in test_postgres.py.
"""

import sqlite3
from pathlib import Path

import pytest

from retinue.errors import MemoryStoreError
from retinue.memory import SQLiteMemory
from retinue.store.sqlite_schema import MIGRATIONS, SCHEMA_VERSION


async def test_a_v1_database_is_upgraded_and_keeps_its_data(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with sqlite3.connect(path, isolation_level=None) as conn:
        conn.executescript(MIGRATIONS[0])
        conn.execute(
            "INSERT INTO passages (tenant, role, content, norm_hash, source, created_at) "
            "VALUES ('t', 'r', 'old passage about zebras', 'h', 'x', 0)"
        )
        conn.execute("PRAGMA user_version = 1")
    store = SQLiteMemory(path)
    assert [p.content for p in await store.search("t", "r", "zebras")] == [
        "old passage about zebras"
    ]
    store.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_newer_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(MemoryStoreError, match="newer than this Retinue"):
        SQLiteMemory(path)


async def test_near_duplicates_differing_by_a_word_are_skipped(tmp_path: Path) -> None:
    store = SQLiteMemory(tmp_path / "m.db")
    base = "the staging cluster runs kubernetes version one point twenty nine on arm nodes"
    assert await store.insert_passage("t", "r", base) is not None
    assert await store.insert_passage("t", "r", base + " today") is None  # 13/14 words shared
    assert await store.insert_passage("t", "r", "staging cluster runs on arm") is not None
    assert await store.insert_passage("t2", "r", base) is not None  # other tenant: no dup
    store.close()
