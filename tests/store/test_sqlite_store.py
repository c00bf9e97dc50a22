"""The SQLite store on its own: conversations, task lists and the schema in one file, with no
memory loaded, and the same file opened by the memory backend built on it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from retinue.memory import SQLiteMemory
from retinue.messages import AssistantMessage, SystemMessage, UserMessage
from retinue.store import ConversationStore, SQLiteStore, TaskStore
from retinue.store.sqlite_schema import SCHEMA_VERSION


def _version(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return conn.execute("PRAGMA user_version").fetchone()[0]


async def test_a_store_alone_keeps_conversations_and_tasks(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "memory.db")
    assert isinstance(store.conversations, ConversationStore)
    assert isinstance(store.tasks, TaskStore)
    history = [SystemMessage("s"), UserMessage("hello"), AssistantMessage("hi")]
    await store.conversations.save("t", "c1", history)
    task = await store.tasks.create("t", "team", "write the report", "", [])
    store.close()

    again = SQLiteStore(tmp_path / "memory.db")
    assert await again.conversations.load("t", "c1") == history
    assert [t.subject for t in await again.tasks.list("t", "team")] == [task.subject]
    assert await again.conversations.load("other-tenant", "c1") is None
    again.close()


async def test_the_memory_backend_opens_a_store_file_and_keeps_its_records(
    tmp_path: Path,
) -> None:
    path = tmp_path / "memory.db"
    store = SQLiteStore(path)
    await store.conversations.save("t", "c1", [UserMessage("kept")])
    store.close()
    assert _version(path) == SCHEMA_VERSION  # the store migrates the whole schema

    memory = SQLiteMemory(path)
    assert await memory.conversations.load("t", "c1") == [UserMessage("kept")]
    block = await memory.set_block("t", "writer", "human", "likes tea")
    assert block.value == "likes tea"
    memory.close()
    assert _version(path) == SCHEMA_VERSION

    reopened = SQLiteStore(path)  # memory's rows do not bother a store that ignores them
    assert [s.id for s in await reopened.conversations.summaries("t")] == ["c1"]
    reopened.close()
