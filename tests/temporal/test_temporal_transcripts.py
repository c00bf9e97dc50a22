"""Transcripts of sessions that ran as workflows, and a front end that reads the workers'
store: against a real dev server, in-process workers with a memory store (SQLite) and, for
the front end, real HTTP (uvicorn on 127.0.0.1).

A session's close keeps its transcript once (its consolidation's activity, tried again,
keeps no second), with its content read back from the blob store; ``retinue serve
--temporal`` given the store serves the transcript routes and shows stubbed content whole,
each tenant its own."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("temporalio", reason="the temporal extra (temporalio) is not installed")

from temporalio.client import Client
from temporalio.testing import ActivityEnvironment
from test_temporal_by_reference import dump_tool
from test_temporal_session_routes import ok, serving
from test_temporal_tree import Remembered, closed, delegate, last_result, role

from retinue.config import Settings
from retinue.engine.compress import AutoCompressor
from retinue.memory import open_store
from retinue.runtime import Runtime
from retinue.server.security import Security
from retinue.server.temporal_front import TemporalFront, create_temporal_app
from retinue.server.tokens import TokenBook
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
    tenant's workers) keeps transcripts and blobs; its consolidations are recorded, and its
    AutoCompress shortens nothing (the scripts answer every model call)."""
    settings = Settings(home=tmp_path / "home", workspace=tmp_path, tenant=tenant)
    runtime = Runtime.create(
        settings, model=main, model_for=lambda _n: helper, roles=[role("helper")],
        extra_tools=[dump_tool(BIG, numbered=False)], with_memory=True, builtins=False,
    )  # fmt: skip
    runtime.compressor = AutoCompressor(edit=None, context_window=10**9)  # (shortens none)
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
    [summary] = await store.ended("default", parent_id=cid)  # (the main agent keeps its own)
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


@asynccontextmanager
async def front_with_store(
    address: str, tmp_path: Path, own: tuple[ScriptedModel, ScriptedModel],
    bo: tuple[ScriptedModel, ScriptedModel],
) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient]]:  # fmt: skip
    """Workers of the service's tenant and of tenant ``bo`` on one database, and a front end
    over HTTP given that database (opened as ``retinue serve --temporal`` opens it); a
    client of each tenant."""
    client = await Client.connect(address)
    queue = f"test-{uuid.uuid4().hex}"
    own_runtime, _ = runtime_for(tmp_path, *own)
    bo_runtime, _ = runtime_for(tmp_path, *bo, tenant="bo")
    memory = open_store(tmp_path / "home")
    front = TemporalFront(client, task_queue=queue, blobs=memory.blobs,
                          transcripts=memory.transcripts)  # fmt: skip
    book = TokenBook(tmp_path / "home")
    bo_token = book.issue("bo")
    app = create_temporal_app(front, Security.build(TOKEN, tokens=book))

    def http(url: str, token: str) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=url, timeout=60,
                                 headers={"Authorization": f"Bearer {token}"})  # fmt: skip

    async with (
        make_worker(client, own_runtime, queue),
        make_worker(client, bo_runtime, front.queue("bo")),
        serving(app) as url,
        http(url, TOKEN) as own_http,
        http(url, bo_token) as bo_http,
    ):
        yield own_http, bo_http
    memory.close()


def tool_contents(messages: list[dict[str, Any]]) -> list[str]:
    """The results of the ``dump`` calls of a history or a transcript."""
    return [m["content"] for m in messages if m["role"] == "tool" and m.get("name") == "dump"]


async def test_a_front_end_with_the_store_shows_content_and_transcripts_per_tenant(
    temporal_address: str, tmp_path: Path
) -> None:
    cid, theirs = f"front-{uuid.uuid4().hex[:8]}", f"bo-{uuid.uuid4().hex[:8]}"
    unload = call_tool("UnloadSubAgent", {"role": "helper"})
    main = ScriptedModel([call_tool("dump"), delegate("helper", "read the dump", **ON),
                          last_result, unload, last_result])  # fmt: skip
    helper = ScriptedModel([call_tool("dump"), "read it: a heron"])
    bo_main = ScriptedModel([call_tool("dump"), "dumped"])
    sid = f"conv-{cid}/helper"
    async with front_with_store(temporal_address, tmp_path, (main, helper),
                                (bo_main, ScriptedModel([]))) as (own, bo):  # fmt: skip
        ok(await own.post(f"/v1/conversations/{cid}/messages", json={"content": "open it"}))
        shown = ok(await own.get(f"/v1/conversations/{cid}"))
        session = ok(await own.get(f"/v1/sessions/{sid}"))
        assert (await own.get(f"/v1/sessions/{sid}/transcript")).status_code == 404  # open
        ok(await own.post(f"/v1/conversations/{cid}/messages", json={"content": "end it"}))
        listed = ok(await own.get("/v1/transcripts"))["transcripts"]
        by_parent = ok(await own.get("/v1/transcripts", params={"parent": f"conv-{cid}"}))
        kept = ok(await own.get(f"/v1/sessions/{sid}/transcript"))
        by_id = ok(await own.get(f"/v1/transcripts/{kept['id']}"))
        hits = ok(await own.get("/v1/transcripts/search", params={"q": "heron"}))["hits"]
        # tenant bo: its own conversation whole, and nothing of the service's tenant
        ok(await bo.post(f"/v1/conversations/{theirs}/messages", json={"content": "dump"}))
        bo_shown = ok(await bo.get(f"/v1/conversations/{theirs}"))
        bo_sees = [
            ok(await bo.get("/v1/transcripts"))["transcripts"],
            ok(await bo.get("/v1/transcripts", params={"parent": f"conv-{cid}"}))["transcripts"],
            ok(await bo.get("/v1/transcripts/search", params={"q": "heron"}))["hits"],
        ]
        bo_gets = [(await bo.get(path)).status_code for path in (
            f"/v1/transcripts/{kept['id']}", f"/v1/sessions/{sid}/transcript",
            f"/v1/sessions/{kept['id']}/transcript", f"/v1/conversations/{cid}")]  # fmt: skip
        own_gets_theirs = (await own.get(f"/v1/conversations/{theirs}")).status_code
    # stubbed content shown whole: the conversation's and an open session's
    assert [len(c) for c in tool_contents(shown["messages"])] == [BIG]
    assert [len(c) for c in tool_contents(session["history"])] == [BIG]
    assert [len(c) for c in tool_contents(bo_shown["messages"])] == [BIG]
    # the closed session's transcript, with the ids as the service names them
    assert [t["id"] for t in listed] == [kept["id"]] == [by_id["id"]]
    assert by_parent["transcripts"] == listed and [h["id"] for h in hits] == [kept["id"]]
    assert (kept["session_id"], kept["parent_id"]) == (sid, f"conv-{cid}")
    assert (kept["role"], kept["kind"], kept["outcome"]) == ("helper", "interactive", "done")
    assert "«heron»" in hits[0]["snippet"] and by_id["children"] == []
    [result] = tool_contents(kept["entries"])
    assert result.endswith(f"[… {BIG - MAX_ENTRY_CHARS} more characters]")  # whole, then cut
    assert bo_sees == [[], [], []] and bo_gets == [404, 404, 404, 404]
    assert own_gets_theirs == 404
    for model in (main, helper, bo_main):
        model.assert_done()


async def test_a_front_end_without_a_store_serves_no_transcripts(tmp_path: Path) -> None:
    """Today's front end: no transcript route (the page says none is kept)."""
    front = TemporalFront(await Client.connect("127.0.0.1:1", lazy=True))
    app = create_temporal_app(front, Security.build(TOKEN))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://127.0.0.1",
                                 headers={"Authorization": f"Bearer {TOKEN}"}) as http:  # fmt: skip
        assert (await http.get("/v1/transcripts")).status_code == 404
        assert (await http.get("/v1/transcripts/search", params={"q": "x"})).status_code == 404


async def test_with_no_worker_a_message_gives_up_the_same_streamed_or_not(
    temporal_address: str,
) -> None:
    """No worker serves the tenant's queue: a message waits ``wait_for_worker_s`` for one,
    then is 503, whether streamed or not (it used to hang past 130 s unstreamed)."""
    client = await Client.connect(temporal_address)
    front = TemporalFront(client, task_queue=f"test-{uuid.uuid4().hex}", wait_for_worker_s=1.0)
    app = create_temporal_app(front, Security.build(TOKEN))
    cid = f"idle-{uuid.uuid4().hex[:8]}"
    auth = {"Authorization": f"Bearer {TOKEN}"}
    try:
        async with serving(app) as url, httpx.AsyncClient(base_url=url, headers=auth,
                                                          timeout=60) as http:  # fmt: skip
            path = f"/v1/conversations/{cid}/messages"
            plain = await http.post(path, json={"content": "hi"})
            streamed = await http.post(path, params={"stream": "true"}, json={"content": "hi"})
    finally:
        await client.get_workflow_handle(f"retinue/default/{cid}").terminate()
    assert plain.status_code == 503 and "no worker answered within 1 s" in plain.text
    assert "event: error" in streamed.text and '"status": 503' in streamed.text
    assert "no worker answered within 1 s" in streamed.text
