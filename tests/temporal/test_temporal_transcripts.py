"""Transcripts of sessions that ran as workflows, and a front end that reads the workers'
store: against a real dev server, in-process workers with a memory store (SQLite) and, for
the front end, real HTTP (uvicorn on 127.0.0.1).

A session's close keeps its transcript once (its consolidation's activity, tried again,
keeps no second), with its content read back from the blob store; ``retinue serve
--temporal`` given the store serves the transcript routes and shows stubbed content whole,
each tenant its own."""

from __future__ import annotations

import uuid
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("temporalio", reason="the temporal extra (temporalio) is not installed")

from temporalio.client import Client
from temporalio.testing import ActivityEnvironment
from test_temporal_by_reference import dump_tool
from test_temporal_tree import Remembered, closed, delegate, last_result, role

from retinue.config import Settings
from retinue.runtime import Runtime
from retinue.store.transcripts import MAX_ENTRY_CHARS, TranscriptStore, transcript_store
from retinue.temporal._types import Agent, ConsolidateStep, Limits
from retinue.temporal.activities import TurnActivities
from retinue.temporal.client import TemporalConversations
from retinue.temporal.transcripts import run_transcript_id
from retinue.temporal.worker import make_worker
from retinue.testing import ScriptedModel, call_tool

pytestmark = pytest.mark.timeout(300)  # a hang bound, the dev server's start included

FAST = Limits(heartbeat_s=2.0)
BIG = 200_000  # a tool result over the inline bound (64 kB): kept by reference
TOKEN = "transcripts-token"
ON = {"interactive": True}


def runtime_for(
    tmp_path: Path, main: ScriptedModel, helper: ScriptedModel, tenant: str = "default"
) -> tuple[Runtime, Remembered]:
    """A worker's runtime whose memory store (SQLite in ``tmp_path/home``, shared by every
    tenant's workers) keeps transcripts and blobs; its consolidations are recorded."""
    settings = Settings(home=tmp_path / "home", workspace=tmp_path, tenant=tenant)
    runtime = Runtime.create(
        settings, model=main, model_for=lambda _n: helper, roles=[role("helper")],
        extra_tools=[dump_tool(BIG, numbered=False)], with_memory=True, builtins=False,
    )  # fmt: skip
    memory = Remembered()
    runtime.manager.factory.memory = memory  # (consolidation asks no model)
    return runtime, memory


def transcripts_of(runtime: Runtime) -> TranscriptStore:
    store = transcript_store(runtime.memory)
    assert store is not None
    return store


def opened_dumped_unloaded(cid: str) -> tuple[ScriptedModel, ScriptedModel]:
    """The main agent opens an interactive helper, which reads a large text and answers;
    then it unloads the helper (its close keeps its transcript)."""
    unload = call_tool("UnloadSubAgent", {"role": "helper"})
    main = ScriptedModel([delegate("helper", "read the dump", **ON), last_result, unload,
                          last_result])  # fmt: skip
    helper = ScriptedModel([call_tool("dump"), f"read it for {cid}"])
    return main, helper


async def test_a_closed_session_keeps_its_transcript_whole_and_once(
    temporal_address: str, tmp_path: Path
) -> None:
    client = await Client.connect(temporal_address)
    convs = TemporalConversations(client, task_queue=f"test-{uuid.uuid4().hex}", limits=FAST)
    cid = f"kept-{uuid.uuid4().hex[:8]}"
    main, helper = opened_dumped_unloaded(cid)
    runtime, memory = runtime_for(tmp_path, main, helper)
    async with make_worker(client, runtime, convs.task_queue):
        await convs.send(cid, "open it")
        [node] = (await convs.state(cid)).sessions
        first_run = (await client.get_workflow_handle(node.workflow_id).describe()).run_id
        await convs.send(cid, "end it")
        await closed(convs, cid)
    main.assert_done()
    helper.assert_done()
    store = transcripts_of(runtime)
    [summary] = await store.ended("default")
    assert memory.consolidated == [("helper", f"{cid}/helper")]
    assert summary.id == run_transcript_id("default", first_run)
    assert (summary.session_id, summary.parent_id, summary.role) == (
        f"{cid}/helper", cid, "helper")  # fmt: skip
    assert (summary.kind, summary.depth, summary.turns, summary.tool_calls) == (
        "interactive", 1, 1, 1)  # fmt: skip
    assert summary.outcome == "done" and summary.cost_usd is None
    assert summary.started_at < summary.ended_at  # (the workflow's start, not the close's)
    found = await store.get("default", summary.id)
    assert found is not None
    [result] = [e for e in found.entries if e["role"] == "tool"]
    # read back whole, then cut as every transcript's entry is (not the stub's head)
    assert result["content"].endswith(f"[… {BIG - MAX_ENTRY_CHARS} more characters]")
    assert "kept by reference" not in result["content"]
    assert found.entries[-1]["content"] == f"read it for {cid}"
    # the worker's own ReadTranscript finds it under the parent's agent id
    assert [s.id for s in await store.ended("default", parent_id=cid)] == [summary.id]
    # another tenant's list of the same database holds none of it
    assert await store.ended("acme") == [] and await store.get("acme", summary.id) is None


async def test_a_consolidation_tried_again_keeps_one_transcript(tmp_path: Path) -> None:
    """The activity run twice for one close (as Temporal may: its worker died after the
    store wrote): one transcript, the first."""
    runtime, memory = runtime_for(tmp_path, ScriptedModel([]), ScriptedModel([]))
    acts = TurnActivities(runtime)
    agent = Agent("c/helper", "helper", [["c/helper", "helper"]], "retinue/default/c",
                  "retinue/default/c")  # fmt: skip
    history = [{"role": "user", "content": "hello there"},
               {"role": "assistant", "content": "general kenobi"}]  # fmt: skip
    step = ConsolidateStep("default", "c", agent, history, "run-1")
    env = ActivityEnvironment()
    await env.run(acts.consolidate, step)
    await env.run(acts.consolidate, replace(step, messages=[*history, history[0]]))
    [summary] = await transcripts_of(runtime).ended("default")
    assert summary.messages == 2 and summary.turns == 1  # the first try's
    assert [h.summary.id for h in await transcripts_of(runtime).search("default", "kenobi")] == [
        summary.id
    ]
    assert len(memory.consolidated) == 2  # (the memory store's run id keeps it once there)


async def test_an_unanswered_question_reads_as_asking(tmp_path: Path) -> None:
    runtime, _ = runtime_for(tmp_path, ScriptedModel([]), ScriptedModel([]))
    agent = Agent("c/helper", "helper", [["c/helper", "helper"]], "p", "r")
    ask = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "q1", "name": "AskParent", "arguments": '{"question": "which one?"}'}]}  # fmt: skip
    step = ConsolidateStep("default", "c", agent, [{"role": "user", "content": "go"}, ask], "r2")
    await ActivityEnvironment().run(TurnActivities(runtime).consolidate, step)
    [summary] = await transcripts_of(runtime).ended("default")
    assert summary.outcome == "asking" and summary.tool_calls == 1
