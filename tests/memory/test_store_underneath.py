"""Each memory backend is its database's store with memory on top: what a store alone
(``retinue.store``, no memory loaded) writes, the backend on the same database reads, and
the other way round, on SQLite and on PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory.backends import empty_database
from retinue.memory import PostgresMemory, SQLiteMemory
from retinue.messages import AssistantMessage, UserMessage
from retinue.store import PostgresStore, SQLiteStore

CHAT = [UserMessage("hello"), AssistantMessage("hi")]


async def test_a_store_and_the_memory_backend_share_one_database(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if backend == "postgres":
        url = request.getfixturevalue("pg_url")
        await empty_database(url)
        store, memory = PostgresStore(url), PostgresMemory(url)
    else:
        store, memory = SQLiteStore(tmp_path / "memory.db"), SQLiteMemory(tmp_path / "memory.db")
    assert isinstance(memory, SQLiteStore | PostgresStore)
    try:
        await store.conversations.save("t", "c1", CHAT)
        await store.tasks.create("t", "team", "write it", "", [])
        assert await memory.conversations.load("t", "c1") == CHAT
        assert [t.subject for t in await memory.tasks.list("t", "team")] == ["write it"]

        await memory.set_block("t", "writer", "human", "likes tea")
        await memory.conversations.save("t", "c2", CHAT[:1])
        assert await store.conversations.load("t", "c2") == CHAT[:1]
        assert sorted(s.id for s in await store.conversations.summaries("t")) == ["c1", "c2"]
    finally:
        for each in (store, memory):
            if isinstance(each, PostgresStore):
                await each.aclose()
            else:
                each.close()
