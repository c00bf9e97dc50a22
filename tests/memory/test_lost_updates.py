"""No update is lost: compare-and-set core blocks, atomic transcripts, scrubbed text.

Real SQLite, real processes, real files; each case is one finding of issue 14.
"""

import asyncio
import json
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from heldmodel import HeldModel
from memory.backends import kept
from retinue.llm.base import ToolSpec
from retinue.memory import MemoryBackend, PostgresMemory, SQLiteMemory
from retinue.memory.text import merge_lines
from retinue.messages import AssistantMessage, Message, UserMessage
from retinue.store.text import scrub
from retinue.testing import ScriptedModel, call_tool

SESSION = [UserMessage("Remember this."), AssistantMessage("Noted.")]


def add_fact(fact: str):
    """A responder that rewrites the ``human`` block it was shown, plus one line."""

    def respond(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> AssistantMessage:
        shown = re.search(r"<human [^>]*>\n(.*?)\n</human>", messages[-1].content, re.S)
        old = shown.group(1) if shown else ""
        new = f"{old}\n{fact}" if old else fact
        return call_tool("memorize", {"block_updates": [{"block": "human", "value": new}]})

    return respond


async def human(store: MemoryBackend) -> list[str]:
    blocks = {b.name: b.value for b in await store.blocks("t", "r")}
    return blocks["human"].splitlines()


def test_merge_lines_keeps_both_sides() -> None:
    assert merge_lines("a", "a\nb", "a\nc") == "a\nc\nb"
    assert merge_lines("a\nold", "a\nnew", "a\nold\nc") == "a\nc\nnew"
    assert merge_lines("", "x", "") == "x"


async def test_parallel_consolidations_in_one_process_keep_every_fact(
    store: MemoryBackend,
) -> None:
    async def one(i: int) -> bool:
        model = ScriptedModel(responder=add_fact(f"fact {i}"), delay=0.02 * (i % 3))
        return await store.consolidate(
            tenant="t", role="r", session_id=f"s{i}", messages=SESSION, model=model
        )

    assert all(await asyncio.gather(*(one(i) for i in range(8))))
    assert sorted(await human(store)) == sorted(f"fact {i}" for i in range(8))
    assert (await store.blocks("t", "r"))[1].version == 8


async def test_a_tool_edit_during_a_consolidation_survives(store: MemoryBackend) -> None:
    await store.set_block("t", "r", "human", "The user is Ana.")

    def respond(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> AssistantMessage:
        value = "The user is Ana.\nAna prefers tea."
        return call_tool("memorize", {"block_updates": [{"block": "human", "value": value}]})

    model = HeldModel(responder=respond)
    task = asyncio.create_task(
        store.consolidate(tenant="t", role="r", session_id="s", messages=SESSION, model=model)
    )
    while not model.waiting.is_set():  # the model has the block; change it under its feet
        await asyncio.sleep(0.005)
    await store.append_block("t", "r", "human", "Ana lives in Porto.")
    model.release.set()
    assert await task
    assert await human(store) == ["The user is Ana.", "Ana lives in Porto.", "Ana prefers tea."]


async def test_a_merge_that_does_not_fit_reads_again_and_asks_anew(
    new_store: Callable[..., MemoryBackend],
) -> None:
    store = new_store(block_limits={"persona": 100, "human": 30})
    await store.set_block("t", "r", "human", "a")
    calls = 0

    def respond(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> AssistantMessage:
        nonlocal calls
        calls += 1
        value = "a\n" + "b" * 20 if calls == 1 else "short summary"
        return call_tool("memorize", {"block_updates": [{"block": "human", "value": value}]})

    model = HeldModel(responder=respond)
    task = asyncio.create_task(
        store.consolidate(tenant="t", role="r", session_id="s", messages=SESSION, model=model)
    )
    while not model.waiting.is_set():
        await asyncio.sleep(0.005)
    await store.set_block("t", "r", "human", "c" * 25)  # the merge would be 46 characters
    model.release.set()
    assert await task
    assert calls == 2
    assert await human(store) == ["short summary"]


PROCESS = """
import asyncio, re, sys
from pathlib import Path
from retinue.memory import open_store
from retinue.messages import UserMessage, AssistantMessage
from retinue.testing import ScriptedModel, call_tool
store = open_store(Path(sys.argv[1]), sys.argv[3] or None)
who = sys.argv[2]
def add(fact):
    def respond(messages, tools):
        shown = re.search(r"<human [^>]*>\\n(.*?)\\n</human>", messages[-1].content, re.S)
        old = shown.group(1) if shown else ""
        value = old + "\\n" + fact if old else fact
        return call_tool("memorize", {"block_updates": [{"block": "human", "value": value}]})
    return respond
async def main():
    for i in range(6):
        model = ScriptedModel(responder=add(f"{who} fact {i}"), delay=0.01)
        ok = await store.consolidate(tenant="t", role="r", session_id=f"{who}{i}",
            messages=[UserMessage("hi"), AssistantMessage("ok")], model=model)
        assert ok
asyncio.run(main())
"""


@pytest.mark.timeout(300)
async def test_three_processes_consolidating_into_one_role_keep_every_update(
    new_store: Callable[..., MemoryBackend], tmp_path: Path
) -> None:
    store = new_store()
    await store.blocks("t", "r")  # migrate once before the race
    url = store.url if isinstance(store, PostgresMemory) else ""
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-c", PROCESS, str(tmp_path), f"p{n}", url
        )
        for n in range(3)
    ]
    # (a hang bound: three Python processes start slowly on a loaded machine)
    assert [await asyncio.wait_for(p.wait(), 240) for p in procs] == [0, 0, 0]
    lines = await human(store)
    expected = {f"p{n} fact {i}" for n in range(3) for i in range(6)}
    assert set(lines) == expected, expected - set(lines)


# -- transcripts (the files of the SQLite store; PostgreSQL keeps them in a table) ---------


async def test_a_complete_leftover_tmp_transcript_is_retried(sqlite_store: SQLiteMemory) -> None:
    path = sqlite_store.pending.write_inflight(
        run_id="r1", tenant="t", role="r", session_id="s1", model="m", messages=SESSION
    )
    path.rename(path.with_name(path.name + ".tmp"))  # killed after fsync, before the rename
    broken = sqlite_store.pending.root / "r2.inflight.json.tmp"
    broken.write_text('{"run_id": "r2", "mess')  # killed mid-write
    model = ScriptedModel([call_tool("memorize", {"new_passages": ["kept across the crash"]})])
    report = await sqlite_store.retry_pending(lambda _: model, stale_after=0)
    assert report.applied == ["s1"]
    assert report.failed == []
    assert [p.content for p in await sqlite_store.search("t", "r", "crash")] == [
        "kept across the crash"
    ]
    assert list(sqlite_store.pending.root.iterdir()) == []


async def test_a_fresh_tmp_transcript_is_left_to_its_writer(sqlite_store: SQLiteMemory) -> None:
    sqlite_store.pending.root.mkdir(parents=True)
    fresh = sqlite_store.pending.root / "r3.inflight.json.tmp"
    fresh.write_text("{")
    assert sqlite_store.pending.ready(stale_after=3600) == []
    assert fresh.exists()


async def test_an_inflight_and_a_failed_copy_of_one_run_are_retried_once(
    sqlite_store: SQLiteMemory,
) -> None:
    path = sqlite_store.pending.write_inflight(
        run_id="r1", tenant="t", role="r", session_id="s1", model="m", messages=SESSION
    )
    data = json.loads(path.read_text())
    (sqlite_store.pending.root / "r1.failed.json.tmp").write_text(json.dumps(data))
    items = sqlite_store.pending.ready(stale_after=0)
    assert [i.run_id for i in items] == ["r1"]
    assert items[0].path.name == "r1.failed.json"


async def test_lone_surrogates_are_scrubbed_not_fatal(store: MemoryBackend) -> None:
    session = [UserMessage("bad \ud83d here"), AssistantMessage("reply \udc00 too")]
    args = '{"block_updates": [{"block": "human", "value": "likes \\ud83d"}], ' + (
        '"new_passages": ["odd \\udc00 char"]}'
    )
    model = ScriptedModel([call_tool("memorize", args)])
    result = await store.consolidate_session(
        tenant="t", role="r", session_id="s", messages=session, model=model
    )
    assert result.ok, result.error
    assert (await store.blocks("t", "r"))[1].value == "likes \ufffd"
    assert [p.content for p in await store.search("t", "r", "odd")] == ["odd \ufffd char"]
    assert scrub("ok \ud800") == "ok \ufffd"
    assert scrub("fine 🙂") == "fine 🙂"
    assert await kept(store) == 0


def test_pending_writes_never_leave_a_tmp_file(sqlite_store: SQLiteMemory) -> None:
    sqlite_store.pending.write_inflight(
        run_id="r9", tenant="t", role="r", session_id="s", model="m", messages=SESSION
    )
    names = [p.name for p in sqlite_store.pending.root.iterdir()]
    assert names == ["r9.inflight.json"]
