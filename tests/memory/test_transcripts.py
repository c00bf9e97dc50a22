"""The TranscriptStore protocol on both stores (SQLite FTS5, PostgreSQL tsvector): kept,
listed, read, searched, pruned, per tenant; reasoning kept as a marker only."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from retinue.memory import MemoryBackend, PostgresMemory, open_memory
from retinue.messages import (
    AssistantMessage,
    Message,
    ReasoningPart,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from retinue.store.sqlite_schema import MIGRATIONS
from retinue.store.transcripts import TranscriptStore, TranscriptSummary, entries_of, transcript_id


@pytest.fixture
async def transcripts(new_store: Callable[..., MemoryBackend]) -> TranscriptStore:
    store = new_store()
    if isinstance(store, PostgresMemory):
        async with store.connection() as conn:
            await conn.execute("TRUNCATE transcripts")
    return store.transcripts


def summary(role: str = "researcher", *, parent: str | None = "main", ended: float = 0.0,
            session: str = "main/researcher#1") -> TranscriptSummary:  # fmt: skip
    now = ended or time.time()
    return TranscriptSummary(
        transcript_id(),
        session,
        parent,
        role,
        "one-shot",
        1,
        1,
        1,
        120,
        30,
        0,
        2,
        0.0012,
        "done",
        now - 5,
        now,
        5,
    )


def history(topic: str) -> list[Message]:
    return [
        SystemMessage("You are a researcher. SYSTEMONLY"),
        UserMessage(f"find out about {topic}"),
        AssistantMessage(
            "",
            (ToolCall("c1", "Grep", f'{{"pattern": "{topic}"}}'),),
            (ReasoningPart("anthropic", "m", "thinking", {"signature": "SECRETSIG"}, "musing"),),
        ),
        ToolResultMessage("c1", "Grep", f"notes.md: {topic} is a migratory bird"),
        AssistantMessage(f"{topic.capitalize()} migrate in winter."),
    ]


def test_the_store_implements_the_protocol(transcripts: TranscriptStore) -> None:
    assert isinstance(transcripts, TranscriptStore)


async def test_a_kept_transcript_reads_back_with_calls_results_and_a_reasoning_marker(
    transcripts: TranscriptStore,
) -> None:
    s = summary()
    await transcripts.keep("t", s, entries_of(history("swallows")))
    got = await transcripts.get("t", s.id)
    assert got is not None
    assert got.summary == s
    roles = [e["role"] for e in got.entries]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    call = got.entries[2]
    assert call["tool_calls"] == [
        {"id": "c1", "name": "Grep", "arguments": '{"pattern": "swallows"}'}
    ]
    assert call["reasoning"] == 1
    assert "SECRETSIG" not in str(got.entries) and "musing" not in str(got.entries)
    assert got.entries[3]["content"] == "notes.md: swallows is a migratory bird"


async def test_listing_is_latest_first_per_tenant_and_by_parent(
    transcripts: TranscriptStore,
) -> None:
    old, new = summary(ended=1000.0), summary("writer", parent="main/x", ended=2000.0)
    for s in (old, new):
        await transcripts.keep("t", s, entries_of(history("owls")))
    await transcripts.keep("other", summary(), entries_of(history("owls")))
    assert [s.id for s in await transcripts.ended("t")] == [new.id, old.id]
    assert [s.id for s in await transcripts.ended("t", parent_id="main/x")] == [new.id]
    by_session = await transcripts.ended("t", session_id="main/researcher#1")
    assert [s.id for s in by_session] == [new.id, old.id]
    assert await transcripts.ended("t", session_id="main/other") == []
    assert await transcripts.get("other", old.id) is None


async def test_search_needs_every_word_and_stays_in_the_tenant(
    transcripts: TranscriptStore,
) -> None:
    swallows, owls = summary(), summary()
    await transcripts.keep("t", swallows, entries_of(history("swallows")))
    await transcripts.keep("t", owls, entries_of(history("owls")))
    await transcripts.keep("u", summary(), entries_of(history("swallows")))
    hits = await transcripts.search("t", "migratory SWALLOWS")
    assert [h.summary.id for h in hits] == [swallows.id]
    assert "«" in hits[0].snippet
    assert {h.summary.id for h in await transcripts.search("t", "migratory")} == {
        swallows.id,
        owls.id,
    }
    assert await transcripts.search("t", "grep") != []  # a call's name is searched too
    assert await transcripts.search("t", "SYSTEMONLY") == []  # the system prompt is not
    assert await transcripts.search("t", 'owls" OR ") NEAR(') == []  # never query syntax
    assert await transcripts.search("t", "   ") == []


async def test_prune_forgets_what_ended_before_and_search_forgets_it_too(
    transcripts: TranscriptStore,
) -> None:
    old, new = summary(ended=1000.0), summary(ended=time.time())
    await transcripts.keep("t", old, entries_of(history("larks")))
    await transcripts.keep("t", new, entries_of(history("wrens")))
    assert await transcripts.prune(2000.0) == 1
    assert [s.id for s in await transcripts.ended("t")] == [new.id]
    assert await transcripts.search("t", "larks") == []


def test_an_older_database_gains_the_transcripts_table_on_open(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "memory.db")
    for script in MIGRATIONS[:-1]:
        conn.executescript(script)
    conn.execute(f"PRAGMA user_version = {len(MIGRATIONS) - 1}")
    conn.close()
    store = open_memory(tmp_path)
    try:
        assert store.transcripts is not None
        tables = {r[0] for r in store._read("SELECT name FROM sqlite_master", ())}  # pyright: ignore[reportPrivateUsage]
        assert {"transcripts", "transcripts_fts"} <= tables
    finally:
        store.close()
