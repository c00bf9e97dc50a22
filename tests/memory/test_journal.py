"""The SessionJournal of durable sessions, on both stores (SQLite, PostgreSQL)."""

from __future__ import annotations

import asyncio
import dataclasses
import random
import sqlite3
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from retinue.errors import MemoryStoreError
from retinue.memory import MemoryBackend, PostgresMemory, SQLiteMemory
from retinue.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from retinue.store import pg_schema, sqlite_schema
from retinue.store.journal import (
    IN_FLIGHT,
    MAX_EXTRA_CHARS,
    RESUMABLE_STATES,
    SessionJournal,
    SessionRecord,
)


@pytest.fixture
def journal(new_store: Callable[..., MemoryBackend]) -> SessionJournal:
    """The journal of a fresh store of each backend."""
    return new_store().journal


def rec(sid: str, state: str = "idle", extra: Mapping[str, Any] | None = None) -> SessionRecord:
    """A record of session ``sid`` in the tree named by its first part."""
    root = sid.split("/")[0]
    parent = sid.rsplit("/", 1)[0] if "/" in sid else None
    kind, role = ("interactive", "helper") if parent else ("main", "main")
    return SessionRecord(sid, root, parent, kind, role, state=state, extra=extra or {})


def chat(*texts: str) -> list[Message]:
    out: list[Message] = [SystemMessage("sys")]
    for text in texts:
        out += [UserMessage(text), AssistantMessage(f"re: {text}")]
    return out


def test_both_stores_implement_the_protocol(journal: SessionJournal) -> None:
    assert isinstance(journal, SessionJournal)


async def test_a_record_and_its_history_load_back_field_for_field(journal: SessionJournal) -> None:
    history: list[Message] = [
        SystemMessage("sys"),
        UserMessage("read a.txt ✓ \x00"),
        AssistantMessage("", (ToolCall("c1", "Read", '{"file_path": "a.txt"}'),)),
        ToolResultMessage("c1", "Read", "no such file", is_error=True),
        AssistantMessage("", (ToolCall("c2", "Bash", '{"command": "ls"}'),)),
    ]
    record = SessionRecord(
        "conv-1/researcher-2",
        "conv-1",
        "conv-1",
        "interactive",
        "researcher",
        instance="alpha",
        state="running",
        turns=3,
        usage=(120, 40, 7, 2),
        steering=("focus on a.txt",),
        inbox=("from conv-1: hello",),
        question=None,
        extra={"budget": {"usd": 0.5}, "pending_call": "c2"},
    )
    await journal.record("t", record, history)
    loaded = await journal.load("t", "conv-1/researcher-2")
    assert loaded is not None
    got, messages = loaded
    assert messages == history
    assert got.updated_at > 0
    assert got == dataclasses.replace(record, updated_at=got.updated_at)
    assert await journal.load("t", "conv-1/other") is None
    # a paused one-shot session asking its question
    asking = SessionRecord(
        "conv-1/w-3", "conv-1", "conv-1", "one-shot", "w", state="asking", question="Which file?"
    )
    await journal.record("t", asking, [])
    loaded = await journal.load("t", "conv-1/w-3")
    assert loaded is not None and loaded[0].question == "Which file?" and loaded[1] == []


async def test_text_no_store_can_hold_is_replaced_not_refused(journal: SessionJournal) -> None:
    lone = "half a pair \ud83d here"
    await journal.record("t", rec("c", extra={"note": lone}), [UserMessage(lone)])
    loaded = await journal.load("t", "c")
    assert loaded is not None
    assert loaded[1] == [UserMessage("half a pair \ufffd here")]
    assert loaded[0].extra == {"note": "half a pair \ufffd here"}


async def test_keep_writes_only_the_tail_and_a_shorter_history_ends_there(
    journal: SessionJournal,
) -> None:
    r = rec("c/a", "running")
    await journal.record("t", r, chat("one"))
    longer = chat("one", "two")
    # the first 3 are stored: what the caller passes there is not written again
    altered: list[Message] = [SystemMessage("changed"), *longer[1:]]
    await journal.record("t", r, altered, keep=3)
    assert await _history(journal, "c/a") == longer
    # keep=0 rewrites the whole history (compression replaced its start)
    summary: list[Message] = [SystemMessage("sys"), UserMessage("summary")]
    await journal.record("t", r, summary)
    assert await _history(journal, "c/a") == summary
    # a keep beyond what is stored counts as what is stored
    await journal.record("t", r, chat("x", "y"), keep=4)
    assert await _history(journal, "c/a") == [*summary, *chat("x", "y")[2:]]
    # a shorter history: what followed is gone, and a longer one later does not see it again
    await journal.record("t", r, chat("x"), keep=3)
    assert await _history(journal, "c/a") == [*summary, chat("x")[2]]
    await journal.record("t", r, [*summary, chat("x")[2], UserMessage("new")], keep=3)
    assert await _history(journal, "c/a") == [*summary, chat("x")[2], UserMessage("new")]


async def _history(journal: SessionJournal, sid: str, tenant: str = "t") -> list[Message]:
    loaded = await journal.load(tenant, sid)
    assert loaded is not None
    return loaded[1]


async def test_a_tree_loads_parents_before_children_and_nothing_else(
    journal: SessionJournal,
) -> None:
    for sid in ("c/b", "c/a/x", "c2", "c", "c/a", "d/c"):
        await journal.record("t", rec(sid), chat(sid))
    tree = await journal.load_tree("t", "c")
    assert [(r.id, m) for r, m in tree] == [
        (sid, chat(sid)) for sid in ("c", "c/a", "c/b", "c/a/x")
    ]
    assert tree[3][0].parent_id == "c/a"
    assert await journal.load_tree("t", "none") == []


async def test_forget_removes_one_session_and_forget_tree_the_whole_tree(
    journal: SessionJournal,
) -> None:
    for sid in ("c", "c/a", "c/a/x", "e"):
        await journal.record("t", rec(sid), chat(sid))
    assert await journal.forget("t", "c/a") is True
    assert await journal.forget("t", "c/a") is False
    assert await journal.load("t", "c/a") is None
    assert [r.id for r, _ in await journal.load_tree("t", "c")] == ["c", "c/a/x"]
    assert await journal.forget_tree("t", "c") == 2
    assert await journal.load_tree("t", "c") == []
    assert await journal.forget_tree("t", "c") == 0
    # the history went too: a session recorded again under the same id starts empty
    await journal.record("t", rec("c/a/x"), [], keep=99)
    assert await _history(journal, "c/a/x") == []
    assert [r.id for r in await journal.records("t")] == ["c/a/x", "e"]


async def test_tenants_never_cross(journal: SessionJournal) -> None:
    await journal.record("t", rec("c"), chat("mine"))
    await journal.record("t", rec("c/a", "running"), chat("mine too"))
    await journal.record("u", rec("c"), chat("theirs"))
    assert await _history(journal, "c", "u") == chat("theirs")
    assert await journal.load("u", "c/a") is None
    assert [r.id for r, _ in await journal.load_tree("u", "c")] == ["c"]
    assert [r.id for r in await journal.records("u")] == ["c"]
    assert await journal.forget_tree("u", "c") == 1
    assert await _history(journal, "c", "t") == chat("mine")
    assert await journal.forget("u", "c/a") is False
    assert await _history(journal, "c/a", "t") == chat("mine too")


async def test_stale_names_trees_with_a_turn_in_flight_recorded_long_ago(
    journal: SessionJournal,
) -> None:
    await journal.record("t", rec("dead"), [])
    await journal.record("t", rec("dead/a", "running"), [])
    await journal.record("t", rec("dead/b", "closing"), [])
    await journal.record("u", rec("dead", "running"), [])
    await journal.record("t", rec("quiet/a", "idle"), [])
    await journal.record("t", rec("waits", "asking"), [])
    cut = await _after_last(journal)
    await journal.record("t", rec("live", "running"), [])
    found = await journal.stale(cut)
    assert sorted(found) == [("t", "dead"), ("u", "dead")]  # each tree once
    assert len(await journal.stale(cut, limit=1)) == 1
    assert await journal.stale(0.0) == []
    # the turn was resumed and finished: no longer stale
    await journal.record("t", rec("dead/a"), [])
    await journal.record("t", rec("dead/b"), [])
    assert ("t", "dead") not in await journal.stale(await _after_last(journal))


async def test_stale_reads_only_the_partial_index_of_turns_in_flight(tmp_path: Path) -> None:
    """SQLite's stale() names the index (INDEXED BY fails the query if the index cannot
    serve it); PostgreSQL's planner picks it by itself once the table is large."""
    assert str(RESUMABLE_STATES) == IN_FLIGHT  # the SQL says the same states
    store = SQLiteMemory(tmp_path / "m.db")
    try:
        assert await store.journal.stale(1e12) == []
        with pytest.raises(MemoryStoreError, match="no query solution"):
            store._read(  # pyright: ignore[reportPrivateUsage]
                "SELECT 1 FROM session_records INDEXED BY session_records_in_flight "
                "WHERE state IN ('running') AND updated_at < 0",
                (),
            )
    finally:
        store.close()


async def _after_last(journal: SessionJournal) -> float:
    """A time after every record so far and before any later one."""
    newest = max(r.updated_at for r in await journal.records(None))
    while True:  # the clock may not have moved since: wait until it has
        await asyncio.sleep(0.001)
        probe = SessionRecord("zz-probe", "zz-probe", None, "main", "main")
        await journal.record("probe", probe, [])
        loaded = await journal.load("probe", "zz-probe")
        await journal.forget("probe", "zz-probe")
        assert loaded is not None
        if loaded[0].updated_at > newest:
            return loaded[0].updated_at


async def test_prune_forgets_whole_trees_whose_newest_record_is_old(
    journal: SessionJournal,
) -> None:
    await journal.record("t", rec("old"), chat("a"))
    await journal.record("t", rec("old/x"), chat("b"))
    await journal.record("t", rec("kept"), chat("c"))
    await journal.record("u", rec("old"), chat("d"))
    cut = await _after_last(journal)
    await journal.record("t", rec("kept/y"), chat("e"))  # a fresh record keeps its whole tree
    assert await journal.prune(cut) == 3
    assert await journal.load_tree("t", "old") == []
    assert await journal.load_tree("u", "old") == []
    assert [r.id for r, m in await journal.load_tree("t", "kept")] == ["kept", "kept/y"]
    assert await _history(journal, "kept") == chat("c")
    # a new session under a pruned id starts with no history left behind
    await journal.record("t", rec("old/x"), [], keep=9)
    assert await _history(journal, "old/x") == []


async def test_records_lists_newest_first_per_tenant_or_all(journal: SessionJournal) -> None:
    await journal.record("t", rec("a"), chat("x"))
    await journal.record("u", rec("b", "asking"), [])
    await journal.record("t", rec("a/c", "running"), [])
    await journal.record("t", rec("a"), chat("x", "y"), keep=3)  # updated again: newest
    everyone = await journal.records(None)
    assert [(r.id, r.state) for r in everyone] == [
        ("a", "idle"),
        ("a/c", "running"),
        ("b", "asking"),
    ]
    assert [r.id for r in await journal.records("t")] == ["a", "a/c"]
    assert [r.id for r in await journal.records(None, limit=1)] == ["a"]
    assert await journal.records("nobody") == []


async def test_what_a_record_may_hold_is_bounded_with_a_clear_error(
    journal: SessionJournal, monkeypatch: pytest.MonkeyPatch
) -> None:
    big = {"blob": "x" * MAX_EXTRA_CHARS}
    with pytest.raises(MemoryStoreError, match=r"extra is \d+ characters"):
        await journal.record("t", rec("a", extra=big), [])
    with pytest.raises(MemoryStoreError, match="extra is not JSON"):
        await journal.record("t", rec("a", extra={"x": object()}), [])
    with pytest.raises(MemoryStoreError, match="state 'lost' is not one of"):
        await journal.record("t", rec("a", "lost"), [])
    monkeypatch.setattr("retinue.store.journal.MAX_SESSION_MESSAGES", 3)
    with pytest.raises(MemoryStoreError, match="4 messages is more than"):
        await journal.record("t", rec("a"), [UserMessage("m")] * 4)
    assert await journal.records(None) == []  # nothing was written


async def test_a_damaged_record_fails_its_load_and_is_left_out_of_listings(
    new_store: Callable[..., MemoryBackend],
) -> None:
    store = new_store()
    await store.journal.record("t", rec("c"), chat("x"))
    await store.journal.record("t", rec("c/a"), chat("y"))
    sql = "UPDATE session_records SET data = '{\"turns\": 1}' WHERE id = 'c/a'"
    if isinstance(store, SQLiteMemory):
        with sqlite3.connect(store.path) as conn:
            conn.execute(sql)
    else:
        async with store.connection() as conn:
            await conn.execute(sql)
    with pytest.raises(MemoryStoreError, match="recorded session 'c/a' is damaged"):
        await store.journal.load("t", "c/a")
    with pytest.raises(MemoryStoreError, match="damaged"):
        await store.journal.load_tree("t", "c")
    assert [r.id for r in await store.journal.records("t")] == ["c"]
    assert await store.journal.forget_tree("t", "c") == 2  # and it can still be forgotten


async def test_concurrent_records_of_one_session_leave_one_whole_history(
    journal: SessionJournal,
) -> None:
    r = rec("c/a", "running")
    histories = [chat(*(f"m{i}" for i in range(n))) for n in (1, 5, 2, 4, 3)]
    await asyncio.gather(*(journal.record("t", r, h, keep=1) for h in histories))
    assert await _history(journal, "c/a") in histories


@pytest.mark.parametrize("seed", [1, 2])
async def test_a_cancelled_record_leaves_the_last_whole_history(
    journal: SessionJournal, seed: int
) -> None:
    """A record cancelled at any await has happened whole or not at all, and the store
    takes the next one (no connection left mid-statement)."""
    rng = random.Random(seed)
    r = rec("c/a", "running")
    recorded = chat("start")
    await journal.record("t", r, recorded)
    for i in range(12):
        history = [*recorded, UserMessage(f"step {i}"), AssistantMessage(f"done {i}")]
        task = asyncio.create_task(journal.record("t", r, history, keep=len(recorded)))
        for _ in range(rng.randrange(6)):
            await asyncio.sleep(0)
        task.cancel()
        try:
            await task
            recorded = history
        except asyncio.CancelledError:
            pass
        got = await _history(journal, "c/a")
        assert got in (recorded, history)
        recorded = got
    final = [*recorded, UserMessage("last")]
    await journal.record("t", r, final, keep=len(recorded))
    assert await _history(journal, "c/a") == final


# -- migrations from the previous schema version ------------------------------------------


async def test_a_sqlite_database_of_the_previous_version_keeps_its_conversations(
    tmp_path: Path,
) -> None:
    path = tmp_path / "m.db"
    previous = sqlite_schema.SCHEMA_VERSION - 1
    with sqlite3.connect(path, isolation_level=None) as conn:
        for script in sqlite_schema.MIGRATIONS[:previous]:
            for statement in sqlite_schema._statements(script):  # pyright: ignore[reportPrivateUsage]
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {previous}")
    with sqlite3.connect(path, isolation_level=None) as conn:
        conn.execute(
            "INSERT INTO conversations (tenant, id, title, message_count, created_at, "
            "updated_at) VALUES ('t', 'c', 'hi', 1, 0, 0)"
        )
        conn.execute(
            "INSERT INTO conversation_messages VALUES ('t', 'c', 0, ?)",
            ('{"role": "user", "content": "hi"}',),
        )
    store = SQLiteMemory(path)
    try:
        assert await store.conversations.load("t", "c") == [UserMessage("hi")]
        await store.journal.record("t", rec("c"), chat("x"))
        assert await _history(store.journal, "c") == chat("x")
    finally:
        store.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == sqlite_schema.SCHEMA_VERSION


async def test_a_postgres_database_of_the_previous_version_keeps_its_conversations(
    pg_url: str,
) -> None:
    import psycopg

    server = pg_url.rsplit("/", 1)[0]
    async with await psycopg.AsyncConnection.connect(f"{server}/postgres", autocommit=True) as c:
        await c.execute("DROP DATABASE IF EXISTS retinue_journal_prev WITH (FORCE)")
        await c.execute("CREATE DATABASE retinue_journal_prev")
    url = f"{server}/retinue_journal_prev"
    previous = pg_schema.SCHEMA_VERSION - 1
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(
            "CREATE TABLE retinue_migrations "
            "(version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        for number, statements in enumerate(pg_schema.MIGRATIONS[:previous], 1):
            for statement in statements:
                await conn.execute(statement)
            await conn.execute("INSERT INTO retinue_migrations (version) VALUES (%s)", (number,))
        await conn.execute(
            "INSERT INTO conversations (tenant, id, title, message_count, created_at, "
            "updated_at) VALUES ('t', 'c', 'hi', 1, 0, 0)"
        )
        await conn.execute(
            "INSERT INTO conversation_messages VALUES ('t', 'c', 0, %s)",
            ('{"role": "user", "content": "hi"}',),
        )
    store = PostgresMemory(url)
    try:
        assert await store.conversations.load("t", "c") == [UserMessage("hi")]
        await store.journal.record("t", rec("c"), chat("x"))
        assert await _history(store.journal, "c") == chat("x")
        async with store.connection() as conn:
            row = await (
                await conn.execute("SELECT max(version) FROM retinue_migrations")
            ).fetchone()
        assert row is not None and row[0] == pg_schema.SCHEMA_VERSION
    finally:
        await store.aclose()
