"""Tokens and cost on Temporal: each model call's activity returns its usage, the workflow
adds it up per turn and per session (across continue-as-new), and a turn's reply, the front
end's answers (JSON, streamed, OpenAI's), the session routes and a session's kept transcript
show it. Against a real dev server, in-process workers, and (the front end) real HTTP."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("temporalio", reason="the temporal extra (temporalio) is not installed")

from temporalio.client import Client, WorkflowUpdateFailedError
from test_temporal_session_routes import ok, serving, until
from test_temporal_transcripts import runtime_for, transcripts_of
from test_temporal_tree import FAST, closed, conversations, delegate, runs_of

from retinue.llm.base import ModelResponse, ToolSpec
from retinue.messages import AssistantMessage, Message, ToolResultMessage, Usage
from retinue.server.security import Security
from retinue.server.temporal_front import TemporalFront, create_temporal_app
from retinue.temporal._types import Agent, ConversationStart, Spent
from retinue.temporal.client import TemporalConversations, workflow_id
from retinue.temporal.worker import make_worker
from retinue.temporal.workflow import ConversationWorkflow
from retinue.testing import ScriptedModel, call_tool

pytestmark = pytest.mark.timeout(300)  # a hang bound, the dev server's start included

TOKEN = "tokens-token"
PRICED = "openai:gpt-4o"  # $2.50 in, $1.25 cached in, $10 out per million tokens
ON = {"interactive": True}


def used(step: Any, i: int, o: int, cached: int = 0) -> Any:
    """A scripted step that reports its usage: ``i`` input (``cached`` of them read from
    the cache) and ``o`` output tokens, one request."""

    def answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
        message = step(messages, tools) if callable(step) else step
        if isinstance(message, str):
            message = AssistantMessage(message)
        assert isinstance(message, AssistantMessage)
        return ModelResponse(message, Usage(i, o, cached, 1))

    return answer


def got(messages: Sequence[Message], _tools: Sequence[ToolSpec]) -> str:
    result = messages[-1]
    assert isinstance(result, ToolResultMessage)
    return "got: " + result.content.split("\n\n[")[0]


async def has_runs(convs: TemporalConversations, wid: str, runs: int) -> bool:
    return await runs_of(convs, wid) >= runs


def figures(spent: Spent) -> tuple[tuple[int, ...], float | None]:
    """Its tokens and requests, and its cost."""
    tokens = (spent.input_tokens, spent.output_tokens, spent.cache_read_tokens, spent.requests)
    return tokens, spent.cost_usd


def result_of(stream: str) -> dict[str, Any]:
    """The data of a streamed turn's ``result`` event."""
    for frame in stream.split("\n\n"):
        rows = dict(line.split(": ", 1) for line in frame.splitlines() if ": " in line)
        if rows.get("event") == "result":
            return json.loads(rows["data"])
    raise AssertionError(f"no result event in {stream[-500:]!r}")


def usage_of(i: int, o: int, cached: int, requests: int) -> dict[str, int]:
    return {"input_tokens": i, "output_tokens": o, "cache_read_tokens": cached,
            "requests": requests}  # fmt: skip


async def test_a_turn_and_a_session_count_their_tokens_across_runs(
    temporal_address: str, tmp_path: Path
) -> None:
    convs = await conversations(temporal_address)
    convs.limits = replace(FAST, max_events=5)  # each turn's run continues as new after it
    cid = f"tokens-{uuid.uuid4().hex[:8]}"
    main = ScriptedModel([used("one", 1000, 100, 400), used("two", 2000, 200)], name=PRICED)
    runtime, _ = runtime_for(tmp_path, main, ScriptedModel())
    async with make_worker(convs.client, runtime, convs.task_queue):
        first = await convs.send(cid, "hi")
        second = await convs.send(cid, "again")
        wid = workflow_id("default", cid)
        await until(lambda: has_runs(convs, wid, 3))  # (Temporal's visibility catches up)
        spent = await convs.handle(cid).query(ConversationWorkflow.usage)  # (the third run's)
        await closed(convs, cid)
    main.assert_done()
    # ((1000 - 400) * 2.5 + 400 * 1.25 + 100 * 10) / 1e6, then (2000 * 2.5 + 200 * 10) / 1e6
    assert figures(first.spent) == ((1000, 100, 400, 1), pytest.approx(0.003))
    assert figures(second.spent) == ((2000, 200, 0, 1), pytest.approx(0.007))
    assert figures(spent) == ((3000, 300, 400, 2), pytest.approx(0.01))


async def test_the_front_end_and_a_kept_transcript_show_the_tokens(
    temporal_address: str, tmp_path: Path
) -> None:
    cid = f"shown-{uuid.uuid4().hex[:8]}"
    sid = f"conv-{cid}/helper"
    unload = call_tool("UnloadSubAgent", {"role": "helper"})
    main = ScriptedModel([
        used(delegate("helper", "look", **ON), 1000, 100, 400), used(got, 2000, 200),  # turn 1
        used("streamed", 30, 3),  # turn 2 (streamed)
        used("openai", 40, 4),  # turn 3 (OpenAI's route)
        used(unload, 5, 1), used(got, 6, 1),  # turn 4: the helper closes
    ])  # fmt: skip
    helper = ScriptedModel([used("seen", 50, 5, 10)])  # (its model has no known price)
    runtime, _ = runtime_for(tmp_path, main, helper)
    client = await Client.connect(temporal_address)
    front = TemporalFront(client, task_queue=f"test-{uuid.uuid4().hex}")
    app = create_temporal_app(front, Security.build(TOKEN))
    auth = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        make_worker(client, runtime, front.task_queue),
        serving(app) as url,
        httpx.AsyncClient(base_url=url, timeout=60, headers=auth) as http,
    ):
        path = f"/v1/conversations/{cid}/messages"
        first = ok(await http.post(path, json={"content": "look"}))
        listed = ok(await http.get("/v1/sessions"))["sessions"]
        shown = ok(await http.get(f"/v1/sessions/{sid}"))
        streamed = await http.post(path, params={"stream": "true"}, json={"content": "go on"})
        openai = ok(await http.post("/v1/chat/completions", headers={"X-Retinue-Conversation": cid},
                                    json={"model": "retinue", "messages": [
                                        {"role": "user", "content": "and"}]}))  # fmt: skip
        ok(await http.post(path, json={"content": "done"}))
        await http.delete(f"/v1/conversations/{cid}")
        await front.conversations("default").handle(cid).result()
    main.assert_done()
    helper.assert_done()
    assert first["usage"] == usage_of(3000, 300, 400, 2)
    counted = {"tokens": 55, "input_tokens": 50, "output_tokens": 5, "cost_usd": None}
    assert [{k: s[k] for k in counted} for s in listed] == [counted]
    assert {k: shown[k] for k in counted} == counted
    assert result_of(streamed.text)["usage"] == usage_of(30, 3, 0, 1)
    assert openai["usage"] == {"prompt_tokens": 40, "completion_tokens": 4, "total_tokens": 44}
    kept = {s.session_id: s for s in await transcripts_of(runtime).ended("default")}
    assert (
        kept[cid].input_tokens,
        kept[cid].output_tokens,
        kept[cid].cache_read_tokens,
        kept[cid].requests,
    ) == (3081, 309, 400, 6)  # (the main agent's: each turn's)
    summary = kept[f"{cid}/helper"]
    assert (summary.session_id, summary.input_tokens, summary.output_tokens,
            summary.cache_read_tokens, summary.requests, summary.cost_usd) == (
        f"{cid}/helper", 50, 5, 10, 1, None)  # fmt: skip


async def test_the_main_agent_keeps_its_transcript_failed_or_empty(
    temporal_address: str, tmp_path: Path
) -> None:
    convs = await conversations(temporal_address)
    convs.limits = replace(FAST, model_attempts=1)  # (a failed model call fails the turn)
    cid, idle = f"main-{uuid.uuid4().hex[:8]}", f"idle-{uuid.uuid4().hex[:8]}"
    main = ScriptedModel([used(delegate("helper", "look", **ON), 10, 1), used(got, 20, 2),
                          RuntimeError("the model is down")])  # fmt: skip
    helper = ScriptedModel([used("seen", 50, 5)])
    runtime, _ = runtime_for(tmp_path, main, helper)
    async with make_worker(convs.client, runtime, convs.task_queue):
        await convs.send(cid, "look")
        with pytest.raises(WorkflowUpdateFailedError):
            await convs.send(cid, "again")
        await closed(convs, cid)
        await convs.start(idle)  # closed before its first message
        await closed(convs, idle)
    main.assert_done()
    helper.assert_done()
    kept = {s.session_id: s for s in await transcripts_of(runtime).ended("default")}
    assert set(kept) == {cid, f"{cid}/helper", idle}
    ran, session, empty = kept[cid], kept[f"{cid}/helper"], kept[idle]
    assert (ran.kind, ran.parent_id, ran.depth, ran.outcome) == ("main", None, 0, "failed")
    assert (ran.input_tokens, ran.output_tokens, ran.requests, ran.turns) == (30, 3, 2, 2)
    assert (session.kind, session.outcome, session.input_tokens) == ("interactive", "done", 50)
    assert (empty.kind, empty.outcome, empty.messages, empty.requests) == ("main", "empty", 0, 0)
    found = await transcripts_of(runtime).get("default", ran.id)
    assert found is not None and found.entries[-1]["content"].startswith("Stopped: ")


async def test_a_session_closed_before_its_first_turn_keeps_an_empty_transcript(
    temporal_address: str, tmp_path: Path
) -> None:
    convs = await conversations(temporal_address)
    cid = f"unused-{uuid.uuid4().hex[:8]}"
    runtime, memory = runtime_for(tmp_path, ScriptedModel(), ScriptedModel())
    async with make_worker(convs.client, runtime, convs.task_queue):
        root = (await convs.start(cid)).id
        agent = Agent(f"{cid}/helper", "helper", [[f"{cid}/helper", "helper"]], root, root)
        start = ConversationStart("default", cid, limits=convs.limits, agent=agent)
        session = await convs.client.start_workflow(
            ConversationWorkflow.run, start, id=f"{root}/helper", task_queue=convs.task_queue
        )
        await session.signal(ConversationWorkflow.close)  # before any message
        assert await session.result() == []
        await closed(convs, cid)
    kept = {s.session_id: s for s in await transcripts_of(runtime).ended("default")}
    empty = kept[f"{cid}/helper"]
    assert (empty.kind, empty.parent_id, empty.outcome, empty.messages) == (
        "interactive", cid, "empty", 0)  # fmt: skip
    assert memory.consolidated == []  # (nothing to consolidate: its transcript alone)
