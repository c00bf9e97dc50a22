"""What workers sweep from the store they share: blobs long unused and old transcripts.

The store's part (which blobs go, which stay) is in ``tests/memory/test_blobs.py``; here:
content swept from under a conversation reads as a note, not a failure (Refs, and a model
call's activity as a worker runs it); a worker's cache does not hide a blob's use; the
sweep's two parts on both stores (SQLite, and PostgreSQL on a server of this module), each
done when the other fails; and a worker that runs sweeps (a real dev server)."""

from __future__ import annotations

import asyncio
import logging
import math
import sqlite3
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("temporalio", reason="the temporal extra (temporalio) is not installed")

from temporalio.testing import ActivityEnvironment

from memory.backends import close, empty_database, make_store, start_pg_server
from retinue.config import Settings
from retinue.engine.transcripts import TranscriptKeeper
from retinue.errors import ConfigError
from retinue.llm.base import ToolSpec
from retinue.memory import MemoryBackend
from retinue.messages import Message, UserMessage
from retinue.runtime import Runtime
from retinue.store.blobs import BlobMissing, HoldsBlobs, PgBlobs, SQLiteBlobs, digest_of
from retinue.store.sqlite import SQLiteStore
from retinue.store.transcripts import TranscriptSummary, entries_of
from retinue.temporal._types import ModelStep
from retinue.temporal.activities import TurnActivities
from retinue.temporal.refs import GONE, BlobCache, Refs, is_stub, resolve_history
from retinue.temporal.sweep import Sweep, Swept
from retinue.temporal.worker import run_worker
from retinue.testing import ScriptedModel

pytestmark = pytest.mark.timeout(300)  # a hang bound, the dev server's start included

DAY = 86_400.0
LONG_AGO = 1_000_000.0  # (Unix seconds: before any real row's time)


def big(text: str, size: int = 50_000) -> str:
    return (text + " ") * (size // (len(text) + 1))


def tool_result(content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": "c1", "name": "dump", "content": content}


async def test_a_swept_message_reads_as_its_head_and_a_note(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "m.db")
    refs = Refs(store.blobs, "t")
    stub = await refs.keep(tool_result(big("secret-ish result")), inline_bytes=1_000)
    assert is_stub(stub) and len((await refs.whole(stub))["content"]) > 40_000
    assert await store.blobs.prune(math.inf) == 1
    gone = await Refs(store.blobs, "t").whole(stub)  # (a worker without it in its cache)
    assert (gone["role"], gone["tool_call_id"], "ref" in gone) == ("tool", "c1", False)
    assert gone["content"].startswith("secret-ish result") and GONE in gone["content"]
    assert "kept by reference" not in gone["content"] and len(gone["content"]) < 2_500
    # a front end that shows the history keeps the stub (its note) as before
    assert await resolve_history([stub], store.blobs, "t") == [stub]
    with pytest.raises(BlobMissing):
        await Refs(store.blobs, "t", strict=True).whole(stub)
    store.close()


async def test_a_swept_history_reads_as_one_note_and_is_stored_again(tmp_path: Path) -> None:
    """The messages since stay; the next stored history holds the note, whose chunk is
    there to read (the note is said once, not looked for again)."""
    store = SQLiteStore(tmp_path / "m.db")
    refs = Refs(store.blobs, "t")
    earlier = [{"role": "user", "content": f"m{k}"} for k in range(3)]
    stub = await refs.store_run(await refs.expand(earlier))
    await store.blobs.prune(math.inf)
    since = [{"role": "assistant", "content": "a"}, {"role": "user", "content": "next"}]
    refs = Refs(store.blobs, "t")
    expanded = await refs.expand([stub, *since])
    [note, *rest] = expanded.forms
    assert note["role"] == "user" and GONE in note["content"] and "3 earlier" in note["content"]
    assert rest == since and (expanded.chunks, expanded.covered) == ([], 0)
    again = await refs.store_run(expanded)
    assert await Refs(store.blobs, "t", strict=True).resolve([again]) == [note, *since]
    store.close()


@pytest.mark.parametrize("max_age", [-1.0, math.inf])
async def test_a_blob_read_from_a_workers_cache_is_read_again_to_stay_kept(
    tmp_path: Path, max_age: float
) -> None:
    """A worker that keeps reading a blob from its cache reads it from the store once its
    cache entry is old (an hour), which marks it used; a cache that never aged (``inf``)
    would let a blob in use look unused."""
    store = SQLiteStore(tmp_path / "m.db")
    store.blobs.clock = lambda: LONG_AGO
    refs = Refs(store.blobs, "t", BlobCache(max_age=max_age))
    stub = await refs.keep(tool_result(big("used often")), inline_bytes=1_000)
    await refs.whole(stub)
    store.blobs.clock = lambda: LONG_AGO + 10 * DAY
    assert GONE not in (await refs.whole(stub))["content"]  # (ten days on: read again)
    removed = await store.blobs.prune(LONG_AGO + 5 * DAY)
    assert removed == (0 if max_age < 0 else 1)
    store.close()


def runtime_for(tmp_path: Path, model: ScriptedModel, **settings: Any) -> Runtime:
    """A worker's runtime with a memory store (SQLite, in ``tmp_path``)."""
    tmp_path.mkdir(exist_ok=True)
    configured = Settings(home=tmp_path / "home", workspace=tmp_path, **settings)
    return Runtime.create(configured, model=model, model_for=lambda _s: model,
                          with_memory=True, builtins=False)  # fmt: skip


def blobs_of(runtime: Runtime) -> SQLiteBlobs | PgBlobs:
    assert isinstance(runtime.memory, HoldsBlobs)
    blobs = runtime.memory.blobs
    assert isinstance(blobs, SQLiteBlobs | PgBlobs)
    return blobs


async def test_a_model_call_after_the_sweep_reads_notes_and_goes_on(tmp_path: Path) -> None:
    """A conversation idle past the retention: its next model call's activity (as a worker
    runs it) succeeds, the model reads what is gone as notes, and what it stores reads."""
    seen: list[list[Message]] = []

    def answer(messages: Sequence[Message], _tools: Sequence[ToolSpec]) -> str:
        seen.append(list(messages))
        return "ok"

    runtime = runtime_for(tmp_path, ScriptedModel(responder=answer))
    refs = Refs(blobs_of(runtime), "default")
    result = await refs.keep(tool_result(big("a large result")), inline_bytes=1_000)
    history = await refs.store_run(await refs.expand([{"role": "user", "content": "first"}]))
    await blobs_of(runtime).prune(math.inf)
    step = ModelStep("k/9", "default", "c", [history, result, {"role": "user", "content": "and?"}],
                     inline_bytes=64_000)  # fmt: skip
    reply = await ActivityEnvironment().run(TurnActivities(runtime).model_call, step)
    assert reply.message["content"] == "ok"
    [sent] = seen
    said = [m.content for m in sent[1:]]
    assert GONE in said[0] and "1 earlier" in said[0] and isinstance(sent[1], UserMessage)
    assert said[1].startswith("a large result") and GONE in said[1] and said[2] == "and?"
    assert reply.stored is not None
    stored = await Refs(blobs_of(runtime), "default", strict=True).expand([reply.stored])
    assert is_stub(stored.forms[1])  # (a stub read as its note each time: it is small)
    opened = await Refs(blobs_of(runtime), "default").resolve([reply.stored])
    assert [m["content"] for m in opened] == said


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    server, url = start_pg_server()
    yield url
    server.stop()


@pytest.fixture(params=["sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[MemoryBackend]:
    """An empty store: SQLite, or PostgreSQL on this module's server."""
    url = request.getfixturevalue("pg_url") if request.param == "postgres" else None
    if url is not None:
        await empty_database(url)
    made = make_store(tmp_path, url)
    assert isinstance(made, HoldsBlobs)
    await made.blobs.prune(math.inf)
    await made.transcripts.prune(math.inf)
    yield made
    await close(made)


def summary(tid: str, ended_at: float) -> TranscriptSummary:
    return TranscriptSummary(tid, f"c/{tid}", "c", "helper", "one-shot", 1, 1, 0, 0, 0, 0, 0,
                             None, "done", ended_at - 10, ended_at, 1)  # fmt: skip


async def sweep_of(store: MemoryBackend, blob_days: float, transcript_days: float) -> Sweep:
    """The sweep of ``store``: a blob and a transcript 40 days old, and one of each a day
    old (``LONG_AGO`` plus 41 days is now)."""
    assert isinstance(store, HoldsBlobs)
    blobs = store.blobs
    assert isinstance(blobs, SQLiteBlobs | PgBlobs)
    for age, name in ((40, "old"), (1, "new")):
        blobs.clock = lambda age=age: LONG_AGO + (41 - age) * DAY
        await blobs.put("t", name.encode() * 100)
        ended = LONG_AGO + (41 - age) * DAY
        await store.transcripts.keep("t", summary(name, ended), entries_of([UserMessage("hi")]))
    return Sweep(blobs, blob_days, TranscriptKeeper(store.transcripts, transcript_days))


async def test_a_sweep_removes_what_is_past_each_retention(store: MemoryBackend) -> None:
    sweep = await sweep_of(store, blob_days=30, transcript_days=7)
    now = LONG_AGO + 41 * DAY
    swept = await sweep.once(now)
    assert (swept.blobs, swept.transcripts) == (1, 1)
    assert await store.transcripts.get("t", "old") is None
    assert await store.transcripts.get("t", "new") is not None
    assert sweep.blobs is not None
    assert await sweep.blobs.get("t", digest_of(b"new" * 100)) == b"new" * 100
    with pytest.raises(BlobMissing):
        await sweep.blobs.get("t", digest_of(b"old" * 100))
    assert await sweep.once(now) == Swept(0, 0)  # (done: nothing more)


async def test_a_blob_retention_of_0_sweeps_no_blob(store: MemoryBackend) -> None:
    sweep = await sweep_of(store, blob_days=0, transcript_days=7)
    swept = await sweep.once(LONG_AGO + 1_000 * DAY)
    assert (swept.blobs, swept.transcripts) == (None, 2)
    assert sweep.blobs is not None
    assert await sweep.blobs.get("t", digest_of(b"old" * 100)) == b"old" * 100


async def test_one_part_that_fails_is_logged_and_the_other_done(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The blobs' store is down (closed): the sweep logs it, prunes the transcripts, and
    sweeps the blobs the next time, when the store is back."""
    down, up = SQLiteStore(tmp_path / "down.db"), SQLiteStore(tmp_path / "up.db")
    await up.transcripts.keep("t", summary("old", LONG_AGO), entries_of([UserMessage("hi")]))
    down.close()
    sweep = Sweep(down.blobs, 30, TranscriptKeeper(up.transcripts, 7))
    with caplog.at_level(logging.WARNING, logger="retinue.temporal.sweep"):
        swept = await sweep.once(LONG_AGO + 10 * DAY)
    assert (swept.blobs, swept.transcripts) == (None, 1)
    assert "could not sweep old blobs" in caplog.text
    back = SQLiteStore(tmp_path / "down.db")
    back.blobs.clock = lambda: LONG_AGO
    await back.blobs.put("t", b"old blob")
    again = Sweep(back.blobs, 30, sweep.transcripts)
    assert (await again.once(LONG_AGO + 40 * DAY)).blobs == 1
    back.close()
    up.close()


def test_a_worker_sweeps_as_its_settings_say(tmp_path: Path) -> None:
    model = ScriptedModel()
    sweep = Sweep.of(runtime_for(tmp_path / "a", model, blob_retention_days=5))
    assert sweep.blobs is not None and sweep.blob_retention_days == 5
    assert sweep.transcripts is not None and sweep.transcripts.retention_days == 30
    none_kept = Sweep.of(runtime_for(tmp_path / "b", model, transcript_retention_days=0))
    assert none_kept.transcripts is None and none_kept.blob_retention_days == 90


@pytest.mark.parametrize(
    ("text", "days", "problem"),
    [
        ("blob_retention_days = 14", 14.0, None),
        ("blob_retention_days = 0", 0.0, None),
        ("", 90.0, None),
        ("blob_retention_days = 0.5", None, "0 \\(never swept\\) or at least 1 day"),
        ("blob_retention_days = -1", None, "greater than or equal to 0"),
        ("blob_retention_days = 'long'", None, "blob_retention_days"),
    ],
)
def test_the_blob_retention_is_set_in_config_toml(
    tmp_path: Path, text: str, days: float | None, problem: str | None
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(text + "\n")
    if problem is not None:
        with pytest.raises(ConfigError, match=problem):
            Settings.load(home=home, workspace=tmp_path)
        return
    assert Settings.load(home=home, workspace=tmp_path).blob_retention_days == days


async def test_a_running_worker_sweeps_and_stops_with_it(
    temporal_address: str, tmp_path: Path
) -> None:
    """``run_worker`` sweeps at its start (then every hour): a blob unused for a year goes,
    one just used stays; cancelling the worker ends the sweep with it."""
    runtime = runtime_for(tmp_path, ScriptedModel())
    blobs = blobs_of(runtime)
    blobs.clock = lambda: LONG_AGO
    old = await blobs.put("default", b"old" * 100)
    blobs.clock = time.time
    new = await blobs.put("default", b"new" * 100)
    assert stored(tmp_path) == {old, new}
    queue = f"test-{uuid.uuid4().hex}"
    working = asyncio.create_task(run_worker(temporal_address, runtime, task_queue=queue))
    try:
        for _ in range(600):  # (a hang bound: the test's timeout is the other; no read of
            if stored(tmp_path) == {new}:  # the old blob here: a read would keep it)
                break
            await asyncio.sleep(0.05)
        assert stored(tmp_path) == {new} and not working.done()
    finally:
        working.cancel()
        with pytest.raises(asyncio.CancelledError):
            await working


def stored(tmp_path: Path) -> set[str]:
    """The digests of the blobs in the worker's store (read beside it, touching none)."""
    [db] = (tmp_path / "home").rglob("*.db")
    with sqlite3.connect(db) as conn:
        return {row[0] for row in conn.execute("SELECT sha256 FROM blobs")}
