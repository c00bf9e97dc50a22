"""History and large tool results by reference: against a real dev server and in-process
workers whose runtime has a memory store (SQLite), and the activities run as a worker runs
them (Temporal's activity environment)."""

from __future__ import annotations

import json
import os
import sqlite3
import uuid
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("temporalio", reason="the temporal extra (temporalio) is not installed")

from temporalio.client import Client
from temporalio.testing import ActivityEnvironment

from retinue.config import Settings
from retinue.engine.compress import AutoCompressor, is_summary
from retinue.llm.base import ToolSpec
from retinue.messages import Message, ToolResultMessage, UserMessage, from_dict
from retinue.runtime import Runtime
from retinue.store.blobs import BlobMissing, HoldsBlobs
from retinue.store.sqlite import SQLiteStore
from retinue.temporal._types import Limits, ModelStep, ToolStep
from retinue.temporal.activities import TurnActivities
from retinue.temporal.client import TemporalConversations
from retinue.temporal.refs import GONE, Refs, is_stub, resolve_history
from retinue.temporal.worker import make_worker
from retinue.temporal.workflow import ConversationWorkflow
from retinue.testing import ScriptedModel, call_tool, call_tools
from retinue.tools.base import Tool, tool

pytestmark = pytest.mark.timeout(300)  # a hang bound, the dev server's start included

FAST = Limits(heartbeat_s=2.0)
MB = 1_000_000


def dump_tool(size: int, *, numbered: bool = True) -> Tool:
    """A read that returns ``size`` characters: its call's number (or not: the same text
    each time), then filler, then END."""
    counter = iter(range(1_000_000))

    @tool
    async def dump() -> str:
        """Return a large text."""
        head = f"dump {next(counter) if numbered else 0}:"
        return head + "x" * (size - len(head) - 3) + "END"

    dump.idempotent = True
    return dump


def runtime_for(
    tmp_path: Path, model: ScriptedModel, tools: Sequence[Tool], tenant: str = "default"
) -> Runtime:
    """A worker's runtime with a memory store (SQLite, in ``tmp_path``); its AutoCompress
    clears and summarises nothing (each test's model is to see the whole history)."""
    tmp_path.mkdir(exist_ok=True)
    settings = Settings(home=tmp_path / "home", workspace=tmp_path, tenant=tenant)
    runtime = Runtime.create(
        settings, model=model, model_for=lambda _s: model, extra_tools=list(tools),
        with_memory=True, builtins=False,
    )  # fmt: skip
    runtime.compressor = AutoCompressor(edit=None, context_window=10**9)
    return runtime


async def conversations(address: str, limits: Limits = FAST) -> TemporalConversations:
    client = await Client.connect(address)
    return TemporalConversations(client, task_queue=f"test-{uuid.uuid4().hex}", limits=limits)


def results_seen(messages: Sequence[Message]) -> list[str]:
    return [m.content for m in messages if isinstance(m, ToolResultMessage)]


def blob_rows(tmp_path: Path) -> int:
    [db] = (tmp_path / "home").rglob("*.db")
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT count(*) FROM blobs").fetchone()[0]


def store_of(runtime: Runtime) -> HoldsBlobs:
    assert isinstance(runtime.memory, HoldsBlobs)
    return runtime.memory


async def history_bytes(convs: TemporalConversations, cid: str) -> int:
    """The bytes of the conversation's workflow history (its current run's events)."""
    history = await convs.handle(cid).fetch_history()
    return sum(e.ByteSize() for e in history.events)


async def test_a_5_mb_tool_result_goes_through_and_the_model_sees_it_whole(
    temporal_address: str, tmp_path: Path
) -> None:
    seen: list[int] = []

    def answer(messages: Sequence[Message], _tools: Sequence[ToolSpec]) -> str:
        [result] = results_seen(messages)
        seen.append(len(result))
        assert result.startswith("dump 0:") and result.endswith("END")
        return f"it is {len(result)} characters long"

    model = ScriptedModel([call_tool("dump"), answer])
    runtime = runtime_for(tmp_path, model, [dump_tool(5 * MB)])
    convs = await conversations(temporal_address)
    async with make_worker(convs.client, runtime, convs.task_queue):
        reply = await convs.send("big", "dump it")
        raw = await convs.handle("big").query(ConversationWorkflow.history)
    assert reply.content == f"it is {5 * MB} characters long" and seen == [5 * MB]
    [stub] = [m for m in raw if m["role"] == "tool"]
    assert is_stub(stub) and len(stub["content"]) < 3_000  # the workflow holds its head
    assert "kept by reference" in stub["content"]
    whole = await resolve_history(raw, store_of(runtime).blobs, "default")  # (a front end's)
    [shown] = [m for m in whole if m["role"] == "tool"]
    assert len(shown["content"]) == 5 * MB and "ref" not in shown
    # another tenant's front end reads nothing of it: the stub's note stays
    other = await resolve_history(raw, store_of(runtime).blobs, "acme")
    assert [m for m in other if m["role"] == "tool"] == [stub]
    assert await history_bytes(convs, "big") < MB


async def test_a_history_past_3_mb_keeps_taking_turns(
    temporal_address: str, tmp_path: Path
) -> None:
    """Each turn's five results (60 kB each, under the inline bound) stay in the workflow's
    history; the model calls carry only what is new, and the runs continue as new past
    2 MB of history each, carrying the stored history's stub."""
    turns, calls, size = 12, 5, 60_000
    seen: list[int] = []

    def respond(messages: Sequence[Message], _tools: Sequence[ToolSpec]) -> object:
        if isinstance(messages[-1], UserMessage):
            return call_tools(*[("dump", {}) for _ in range(calls)])
        results = results_seen(messages)
        assert all(len(r) == size for r in results)  # every one whole, none a stub
        seen.append(len(results))
        return f"{len(results)} results so far"

    model = ScriptedModel(responder=respond, record=False)
    runtime = runtime_for(tmp_path, model, [dump_tool(size)])
    limits = replace(FAST, max_history_bytes=2 * MB)
    convs = await conversations(temporal_address, limits)
    async with make_worker(convs.client, runtime, convs.task_queue):
        for k in range(turns):
            reply = await convs.send("long", f"turn {k}")
            assert reply.content == f"{calls * (k + 1)} results so far"
        runs = [w async for w in convs.client.list_workflows("WorkflowId = 'retinue/default/long'")]
    assert seen == [calls * (k + 1) for k in range(turns)]
    assert turns * calls * size > 3 * MB  # the history the model saw last
    assert len(runs) > 1  # (it continued as new, and went on)


async def per_turn_bytes(address: str, tmp_path: Path, limits: Limits, turns: int) -> list[int]:
    """The workflow history's growth in each of ``turns`` turns (a 4 kB read and an
    answer per turn)."""
    model = ScriptedModel(
        responder=lambda m, _t: call_tool("dump") if isinstance(m[-1], UserMessage) else "ok",
        record=False,
    )
    runtime = runtime_for(tmp_path, model, [dump_tool(4_000)])
    convs = await conversations(address, limits)
    grown: list[int] = []
    cid = f"flat-{tmp_path.name}"  # (each run its own workflow)
    async with make_worker(convs.client, runtime, convs.task_queue):
        before = 0
        for k in range(turns):
            await convs.send(cid, f"turn {k}")
            now = await history_bytes(convs, cid)
            grown.append(now - before)
            before = now
    return grown


async def test_history_bytes_per_turn_stay_flat(temporal_address: str, tmp_path: Path) -> None:
    grown = await per_turn_bytes(temporal_address, tmp_path / "ref", FAST, 30)
    assert grown[29] < 2 * grown[4], grown
    # the measure tells: with the whole history in each model call, it grows with the turns
    inline = await per_turn_bytes(temporal_address, tmp_path / "inline",
                                  replace(FAST, inline_bytes=0), 30)  # fmt: skip
    assert inline[29] > 3 * inline[4], inline


async def test_a_history_autocompress_shortened_comes_back_as_its_stub(
    temporal_address: str, tmp_path: Path
) -> None:
    """The shortened history is stored, and the workflow holds its stub, not the whole
    shortened history once more; a front end reads it whole."""
    summary = "The user asked a long question; it was answered."
    model = ScriptedModel(["ok", summary, "final"])
    runtime = runtime_for(tmp_path, model, [])
    runtime.compressor = AutoCompressor(context_window=1_600, output_reserve=100)  # at 1,200
    convs = await conversations(temporal_address)
    async with make_worker(convs.client, runtime, convs.task_queue):
        await convs.send("short", "question: " + "lorem ipsum " * 600)  # ~1,500 tokens
        assert (await convs.send("short", "and now?")).content == "final"
        raw = await convs.handle("short").query(ConversationWorkflow.history)
        outline = await convs.handle("short").query(ConversationWorkflow.outline)
    model.assert_done()
    assert [m["role"] for m in raw] == ["system", "assistant"] and is_stub(raw[0])
    assert outline.opening.startswith("question: lorem ipsum")  # (kept from before)
    whole = [from_dict(m) for m in await resolve_history(raw, store_of(runtime).blobs, "default")]
    assert is_summary(whole[0]) and summary in whole[0].content
    assert [(m.role, m.content) for m in whole[-2:]] == [("user", "and now?"),
                                                         ("assistant", "final")]  # fmt: skip


async def test_a_stored_history_stays_whole_over_many_calls(tmp_path: Path) -> None:
    """Each model call stores its new messages as one chunk, past 16 merged into one: the
    stub stays small, and it reads back every message, in order."""
    store = SQLiteStore(tmp_path / "m.db")
    refs = Refs(store.blobs, "t")
    every: list[dict[str, Any]] = []
    stub: dict[str, Any] | None = None
    sizes: list[int] = []
    for k in range(40):
        new: list[dict[str, Any]] = [{"role": "user", "content": f"m{k}"},
                                     {"role": "assistant", "content": f"a{k}"}]  # fmt: skip
        every.extend(new)
        stub = await refs.store_run(await refs.expand([*([stub] if stub else []), *new]))
        sizes.append(len(stub["ref"]["chunks"]))
    assert stub is not None and await refs.resolve([stub]) == every
    assert max(sizes) == 16 and sizes[16] == 1  # (merged)
    with pytest.raises(BlobMissing):  # a stub of more chunks than ever made: not read
        await refs.resolve([{**stub, "ref": {"chunks": ["0" * 64] * 17, "messages": 1}}])
    store.close()


def activities_for(tmp_path: Path, tenant: str, model: ScriptedModel) -> TurnActivities:
    tools = [dump_tool(200_000, numbered=False)]
    return TurnActivities(runtime_for(tmp_path, model, tools, tenant))


async def test_a_ref_of_another_tenant_is_refused(tmp_path: Path) -> None:
    """Two tenants' workers on one database: B's model call given A's reference reads a
    note that the content is not kept (the store has no such blob for B), not A's content;
    A's reads it whole."""
    seen: list[str] = []

    def answer(messages: Sequence[Message], _tools: Sequence[ToolSpec]) -> str:
        seen.append(results_seen(messages)[0])
        return "ok"

    env = ActivityEnvironment()
    call = {"id": "c1", "name": "dump", "arguments": "{}"}
    a = activities_for(tmp_path, "a", ScriptedModel(responder=answer))
    outcome = await env.run(a.tool_call, ToolStep("k/1/c1", "a", "c", call, inline_bytes=64_000))
    stub = outcome.result
    assert stub is not None and is_stub(stub)
    history = [{"role": "user", "content": "dump"}, stub]
    b = activities_for(tmp_path, "b", ScriptedModel(responder=answer))
    await env.run(b.model_call, ModelStep("k/2", "b", "c", history, inline_bytes=64_000))
    [note] = seen
    assert GONE in note and len(note) < 3_000 and "x" * 3_000 not in note
    digest = stub["ref"]["sha256"]
    with pytest.raises(BlobMissing):
        await store_of(b.runtime).blobs.get("b", digest)
    await env.run(a.model_call, ModelStep("k/2", "a", "c", history, inline_bytes=64_000))
    assert len(seen[1]) == 200_000


async def test_an_activity_tried_again_writes_one_blob(tmp_path: Path) -> None:
    env = ActivityEnvironment()
    model = ScriptedModel(responder=lambda _m, _t: "ok")
    acts = activities_for(tmp_path, "default", model)
    call = {"id": "c1", "name": "dump", "arguments": "{}"}
    step = ToolStep("k/1/c1", "default", "c", call, inline_bytes=64_000)
    first = await env.run(acts.tool_call, step)
    assert blob_rows(tmp_path) == 1
    env.info = replace(env.info, attempt=2)  # (a read is tried again: it runs again)
    again = await env.run(acts.tool_call, step)
    assert blob_rows(tmp_path) == 1 and again.result == first.result
    assert first.result is not None
    # the model call tried again stores the same history: no second chunk
    history = [{"role": "user", "content": "dump"}, first.result]
    sent = ModelStep("k/2", "default", "c", history, inline_bytes=64_000)
    stored = (await env.run(acts.model_call, sent)).stored
    rows = blob_rows(tmp_path)
    assert stored is not None and (await env.run(acts.model_call, sent)).stored == stored
    assert blob_rows(tmp_path) == rows


@pytest.mark.skipif(
    os.environ.get("RETINUE_RECORD_HISTORIES") != "1", reason="records only when asked to"
)
async def test_record_a_history_by_reference(temporal_address: str, tmp_path: Path) -> None:
    """A history with a result by reference and model calls that send the stored history's
    stub, for ``test_temporal_replay.py`` (which replays every file in ``histories/``)."""
    model = ScriptedModel([call_tool("dump"), "one", call_tools(("dump", {}), ("dump", {})),
                           "two", "three"])  # fmt: skip
    runtime = runtime_for(tmp_path, model, [dump_tool(200_000)])
    convs = await conversations(temporal_address)
    async with make_worker(convs.client, runtime, convs.task_queue):
        for text in ("dump one", "dump two", "and now"):
            await convs.send("recorded", text)
        await convs.close("recorded")
        await convs.handle("recorded").result()
    model.assert_done()
    history = await convs.handle("recorded").fetch_history()
    saved = {"workflow_id": convs.handle("recorded").id, "history": json.loads(history.to_json())}
    out = Path(__file__).parent / "histories" / "2026-12-04-by-reference-conversation.json"
    out.write_text(json.dumps(saved, indent=1) + "\n", encoding="utf-8")
