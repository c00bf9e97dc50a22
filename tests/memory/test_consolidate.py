"""Consolidation: what the scripted model answers is written, once; nothing is lost."""

import asyncio
import json

import pytest

from memory.backends import apply_consolidation, consolidations, kept, ready, write_inflight
from retinue.errors import ModelError
from retinue.memory import MemoryBackend, SQLiteMemory
from retinue.memory.consolidate import render_transcript
from retinue.messages import AssistantMessage, SystemMessage, ToolResultMessage, UserMessage
from retinue.testing import ScriptedModel, call_tool

SESSION = [
    SystemMessage("You are the dba role."),
    UserMessage("Our primary database is Postgres 16 on host db1."),
    AssistantMessage("Understood, Postgres 16 on db1."),
]


def memorize(blocks: dict[str, str] | None = None, passages: list[str] | None = None):
    updates = [{"block": k, "value": v} for k, v in (blocks or {}).items()]
    return call_tool("memorize", {"block_updates": updates, "new_passages": passages or []})


async def test_writes_exactly_what_the_model_returns_once(store: MemoryBackend) -> None:
    await store.set_block("t", "dba", "human", "Ops team")
    await store.insert_passage("t", "dba", "Postgres backups run nightly at 02:00")
    model = ScriptedModel(
        [memorize({"working_context": "Primary: Postgres 16 on db1"}, ["db1 is the primary"])]
    )
    await store.consolidate(tenant="t", role="dba", session_id="s1", messages=SESSION, model=model)

    model.assert_done()
    assert model.call_count == 1
    (request,) = model.calls
    assert request.tool_names == ["memorize"]
    prompt = request.messages[-1].content
    assert "Ops team" in prompt  # current blocks
    assert "Postgres backups run nightly" in prompt  # a similar archival passage
    assert "USER: Our primary database is Postgres 16 on host db1." in prompt
    blocks = {b.name: b.value for b in await store.blocks("t", "dba")}
    assert blocks == {
        "persona": "",
        "human": "Ops team",
        "working_context": "Primary: Postgres 16 on db1",
    }
    hits = await store.search("t", "dba", "primary", limit=10)
    assert [h.content for h in hits] == ["db1 is the primary"]
    assert hits[0].source == "session:s1"
    assert await store.passage_count("t", "dba") == 2
    assert await consolidations(store) == 1
    assert await kept(store) == 0


async def test_passages_duplicating_stored_ones_are_skipped(store: MemoryBackend) -> None:
    await store.insert_passage("t", "dba", "db1 is the primary")
    model = ScriptedModel([memorize(passages=["DB1 is the primary.", "db2 is a replica"])])
    result = await store.consolidate_session(
        tenant="t", role="dba", session_id="s", messages=SESSION, model=model
    )
    assert result.ok and result.passages_added == 1
    assert await store.passage_count("t", "dba") == 2


async def test_invalid_answer_is_sent_back_with_the_reason(store: MemoryBackend) -> None:
    model = ScriptedModel(
        [memorize({"persona": "x" * 5000}), memorize({"persona": "I am the DBA"})]
    )
    result = await store.consolidate_session(
        tenant="t", role="dba", session_id="s", messages=SESSION, model=model
    )
    assert result.ok and result.blocks_updated == 1
    retry_request = model.calls[1].messages
    assert isinstance(retry_request[-1], ToolResultMessage)
    assert "5000 chars, limit 2000" in retry_request[-1].content
    assert "I am the DBA" in await store.render("t", "dba")


async def test_empty_session_calls_no_model(store: MemoryBackend) -> None:
    model = ScriptedModel()
    await store.consolidate(
        tenant="t", role="dba", session_id="s", messages=[SystemMessage("x")], model=model
    )
    assert model.call_count == 0


def test_transcript_is_trimmed_keeping_the_newest() -> None:
    messages = [UserMessage(f"turn {i} " + "word " * 50) for i in range(100)]
    text = render_transcript(messages, token_budget=500)
    assert "turn 99 " in text
    assert "turn 0 " not in text
    assert "earlier message(s) omitted" in text.splitlines()[0]
    assert len(text) < 500 * 4 + 400


async def test_failure_keeps_the_transcript_and_retry_applies_it(store: MemoryBackend) -> None:
    failing = ScriptedModel([ModelError("503 from provider")] * 3)
    result = await store.consolidate_session(
        tenant="t", role="dba", session_id="sess-42", messages=SESSION, model=failing
    )  # does not raise
    assert not result.ok and "503 from provider" in result.error
    assert failing.call_count == 3
    assert await store.passage_count("t", "dba") == 0
    assert result.transcript is not None and await kept(store) == 1
    if isinstance(store, SQLiteMemory):  # the file itself
        assert result.transcript.name.endswith(".failed.json")
        on_disk = json.loads(result.transcript.read_text())
        assert on_disk["session_id"] == "sess-42"
        assert on_disk["messages"][1]["content"] == SESSION[1].content

    good = ScriptedModel([memorize(passages=["db1 is the primary"])])
    seen: list[str] = []

    def model_for(recorded: str):
        seen.append(recorded)
        return good

    report = await store.retry_pending(model_for)
    assert report.applied == ["sess-42"] and report.failed == []
    assert seen == ["scripted:model"]
    assert "USER: Our primary database" in good.calls[0].messages[-1].content
    assert await store.passage_count("t", "dba") == 1
    assert await kept(store) == 0
    assert (await store.retry_pending(model_for)).applied == []  # nothing left


async def test_retry_that_fails_again_keeps_the_file(store: MemoryBackend) -> None:
    await store.consolidate(
        tenant="t", role="dba", session_id="s", messages=SESSION,
        model=ScriptedModel([ModelError("down")] * 3),
    )  # fmt: skip
    report = await store.retry_pending(lambda _: ScriptedModel([ModelError("still")] * 3))
    assert report.failed == [("s", "ModelError: still")]
    assert await kept(store) == 1


async def test_cancelled_consolidation_keeps_the_transcript(store: MemoryBackend) -> None:
    slow = ScriptedModel([memorize()], delay=10)
    task = asyncio.create_task(
        store.consolidate(tenant="t", role="dba", session_id="s", messages=SESSION, model=slow)
    )
    while slow.call_count == 0:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    (item,) = await ready(store)
    assert item.session_id == "s" and "cancelled" in item.error


async def test_retry_of_an_already_committed_run_writes_nothing_twice(
    store: MemoryBackend,
) -> None:
    # A process that committed but died before deleting its transcript leaves it behind.
    await write_inflight(
        store, run_id="r1", tenant="t", role="dba", session_id="s", model="m", messages=SESSION
    )
    await apply_consolidation(
        store, run_id="r1", tenant="t", role="dba", session_id="s",
        block_updates={"human": "Ops"}, passages=[],
    )  # fmt: skip
    assert await ready(store) == []  # a fresh inflight transcript is not touched
    model = ScriptedModel([memorize({"human": "Someone else"})])
    report = await store.retry_pending(lambda _: model, stale_after=0)
    assert report.applied == ["s"]
    assert "Someone else" not in await store.render("t", "dba")
    assert await consolidations(store) == 1
    assert await kept(store) == 0


async def test_concurrent_consolidations_of_different_sessions(store: MemoryBackend) -> None:
    async def one(i: int) -> None:
        model = ScriptedModel([memorize(passages=[f"fact number {i} zq{i}"])], delay=0.01)
        await store.consolidate(
            tenant="t", role="dba", session_id=f"s{i}", messages=SESSION, model=model
        )

    await asyncio.gather(*(one(i) for i in range(10)))
    assert await store.passage_count("t", "dba") == 10
    assert await consolidations(store) == 10
