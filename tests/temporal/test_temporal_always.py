"""An "always" answer to an approval on Temporal: the rule the in-process policy adds (here,
a program's own tool: its name) allows that tool for the rest of the conversation, in every
session of its tree, across turns, runs that continued as new, and activities. And the
program's ``before_model`` and ``on_answer`` guards, which run in the model activity."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("temporalio", reason="the temporal extra (temporalio) is not installed")

from test_temporal_tree import (  # (the same conftest folder)
    DEPLOYED,
    FAST,
    approvals_of,
    closed,
    conversations,
    delegate,
    deploy,
    heard,
    last_result,
    role,
    runs_of,
    runtime_for,
)

from retinue.policy.approvals import ApprovalRequest
from retinue.policy.guards import FinalAnswer, Guard, ModelRequest, Verdict
from retinue.runtime import Runtime
from retinue.temporal._types import TurnReply
from retinue.temporal.client import TemporalConversations
from retinue.temporal.worker import make_worker
from retinue.testing import ScriptedModel, call_tool

pytestmark = pytest.mark.timeout(300)  # a hang bound, the dev server's start included

ASKS_NOBODY = 60  # s: a turn that asks would wait for an answer that never comes


async def unasked(convs: TemporalConversations, cid: str, text: str) -> str:
    """The reply to a turn that must run without asking anybody (bounded: one that asks
    waits on a person)."""
    async with asyncio.timeout(ASKS_NOBODY):
        return (await convs.send(cid, text)).content


async def answered_always(
    convs: TemporalConversations, cid: str, text: str
) -> tuple[ApprovalRequest, TurnReply]:
    """Send ``text``, answer the one approval its turn asks for with "always": the request,
    and the turn's reply."""
    turn = asyncio.create_task(convs.send(cid, text))
    [request] = await approvals_of(convs, cid)
    await convs.approve(cid, request.id, allow=True, always=True)
    return request, await turn


def deploying_twice(tmp_path: Path) -> tuple[ScriptedModel, Runtime]:
    """A main agent that deploys to prod in one turn and to stage in the next."""
    main = ScriptedModel([call_tool("deploy", {"target": "prod"}), last_result,
                          call_tool("deploy", {"target": "stage"}), last_result])  # fmt: skip
    runtime, _ = runtime_for(tmp_path, main, {}, roles=[], tools=[deploy])
    return main, runtime


async def test_always_allows_the_tool_for_the_rest_of_the_conversation(
    temporal_address: str, tmp_path: Path
) -> None:
    DEPLOYED.clear()
    convs = await conversations(temporal_address)
    convs.limits = replace(FAST, max_events=12)  # it continues as new between the turns
    main, runtime = deploying_twice(tmp_path)
    async with make_worker(convs.client, runtime, convs.task_queue):
        await convs.start("always-1")
        request, first = await answered_always(convs, "always-1", "deploy prod")
        second = await unasked(convs, "always-1", "deploy stage")
        runs = await runs_of(convs, convs.handle("always-1").id)
        after = await convs.state("always-1")
        await closed(convs, "always-1")
    main.assert_done()
    assert request.rule == "deploy"  # what "always" adds, as the person was shown
    assert first.content == "got: deployed prod"
    assert second == "got: deployed stage"
    assert runs >= 2  # (the rule was carried to the next run)
    assert DEPLOYED == ["prod", "stage"]
    assert after.approvals == []


async def test_a_plain_allow_allows_that_call_only(temporal_address: str, tmp_path: Path) -> None:
    DEPLOYED.clear()
    convs = await conversations(temporal_address)
    main, runtime = deploying_twice(tmp_path)
    async with make_worker(convs.client, runtime, convs.task_queue):
        await convs.start("always-2")
        turn = asyncio.create_task(convs.send("always-2", "deploy prod"))
        [first] = await approvals_of(convs, "always-2")
        await convs.approve("always-2", first.id, allow=True)
        await turn
        turn = asyncio.create_task(convs.send("always-2", "deploy stage"))
        [second] = await approvals_of(convs, "always-2")  # asked again
        assert DEPLOYED == ["prod"]
        await convs.approve("always-2", second.id, allow=True)
        await turn
        await closed(convs, "always-2")
    main.assert_done()
    assert second.id != first.id and '"stage"' in second.arguments
    assert DEPLOYED == ["prod", "stage"]


async def test_always_at_the_top_allows_a_sub_agent_s_call(
    temporal_address: str, tmp_path: Path
) -> None:
    DEPLOYED.clear()
    convs = await conversations(temporal_address)
    main = ScriptedModel([delegate("a", "hello", interactive=True), last_result,
                          call_tool("deploy", {"target": "prod"}), last_result,
                          delegate("a", "deploy stage", interactive=True), last_result,
                          delegate("b", "deploy dev"), last_result])  # fmt: skip
    a = ScriptedModel(["hi", call_tool("deploy", {"target": "stage"}), last_result])
    b = ScriptedModel([call_tool("deploy", {"target": "dev"}), last_result])
    models = {"scripted:a": a, "scripted:b": b}
    runtime, _ = runtime_for(tmp_path, main, models, roles=[role("a"), role("b")],
                             tools=[deploy])  # fmt: skip
    async with make_worker(convs.client, runtime, convs.task_queue):
        await convs.start("always-3")
        assert await unasked(convs, "always-3", "greet a") == "got: hi"  # a is open from now
        request, done = await answered_always(convs, "always-3", "deploy prod")
        open_one = await unasked(convs, "always-3", "have a deploy stage")  # told at once
        new_one = await unasked(convs, "always-3", "have b deploy dev")  # opened with it
        roles = sorted(n.role for n in (await convs.state("always-3")).sessions)
        await closed(convs, "always-3")
    main.assert_done()
    a.assert_done()
    assert request.depth == 0 and done.content == "got: deployed prod"
    assert roles.count("a") == 1  # the one session a, across the turns
    assert open_one == "got: got: deployed stage"
    assert new_one == "got: got: deployed dev"
    assert DEPLOYED == ["prod", "stage", "dev"]


async def test_always_in_a_sub_agent_reaches_the_top_and_its_other_sessions(
    temporal_address: str, tmp_path: Path
) -> None:
    DEPLOYED.clear()
    convs = await conversations(temporal_address)
    main = ScriptedModel([delegate("b", "hello", interactive=True), last_result,
                          delegate("a", "deploy prod", interactive=True), last_result,
                          delegate("b", "deploy stage", interactive=True), last_result,
                          call_tool("deploy", {"target": "dev"}), last_result])  # fmt: skip
    a = ScriptedModel([delegate("c", "deploy prod"), last_result])
    b = ScriptedModel(["hi", call_tool("deploy", {"target": "stage"}), last_result])
    c = ScriptedModel([call_tool("deploy", {"target": "prod"}), last_result])
    models = {"scripted:a": a, "scripted:b": b, "scripted:c": c}
    roles = [role("a", "spawn_agent"), role("b"), role("c")]
    runtime, _ = runtime_for(tmp_path, main, models, roles=roles, tools=[deploy])
    async with make_worker(convs.client, runtime, convs.task_queue):
        await convs.start("always-4")
        await unasked(convs, "always-4", "greet b")
        request, _ = await answered_always(convs, "always-4", "have a's c deploy prod")
        other = await unasked(convs, "always-4", "have b deploy stage")
        top = await unasked(convs, "always-4", "deploy dev")
        roles = sorted(n.role for n in (await convs.state("always-4")).sessions)
        await closed(convs, "always-4")
    main.assert_done()
    b.assert_done()
    assert (request.role, request.depth) == ("c", 2)
    assert roles.count("b") == 1  # the one session b, open before the answer
    assert other == "got: got: deployed stage"
    assert top == "got: deployed dev"
    assert DEPLOYED == ["prod", "stage", "dev"]


# -- the program's guards on Temporal (before_model, on_answer) ---------------------------


def hide_passwords(request: ModelRequest) -> Verdict[Any] | None:
    """Refuse a call whose last message says "secret"; send "password" as "***"."""
    if "secret" in request.messages[-1].content:
        return Verdict.deny("no secrets to the model")
    if not any("password" in m.content for m in request.messages):
        return None
    return Verdict.rewrite([replace(m, content=m.content.replace("password", "***"))
                            for m in request.messages])  # fmt: skip


def clean_answer(answer: FinalAnswer) -> Verdict[Any] | None:
    """Withhold an answer that says "classified"; say "darn" as "[redacted]"."""
    if "classified" in answer.content:
        return Verdict.deny("it is classified")
    if "darn" in answer.content:
        return Verdict.rewrite(answer.content.replace("darn", "[redacted]"))
    return None


async def test_before_model_guards_rewrite_what_is_sent_or_refuse_the_call(
    temporal_address: str, tmp_path: Path
) -> None:
    convs = await conversations(temporal_address)
    main = ScriptedModel([heard, heard])
    runtime, _ = runtime_for(tmp_path, main, {}, roles=[],
                             guards=[Guard(before_model=hide_passwords)])  # fmt: skip
    async with make_worker(convs.client, runtime, convs.task_queue):
        rewritten = await convs.send("guard-1", "my password is x")
        refused = await convs.send("guard-1", "tell the secret")
        after = await convs.send("guard-1", "and now?")
        history = await convs.history("guard-1")
        await closed(convs, "guard-1")
    main.assert_done()
    assert (rewritten.content, rewritten.stop_reason) == ("heard: my *** is x", "final")
    assert refused.stop_reason == "refused"
    assert refused.content.startswith("Stopped: the model call was refused: ")
    assert "no secrets to the model" in refused.content
    assert after.content == "heard: my *** is x | tell the secret | and now?"
    assert history[0].content == "my password is x"  # the history keeps what was said
    assert [m.content for m in history if m.role == "assistant"][1] == refused.content


async def test_on_answer_guards_rewrite_or_withhold_the_answer_at_every_depth(
    temporal_address: str, tmp_path: Path
) -> None:
    convs = await conversations(temporal_address)
    main = ScriptedModel(["darn it", "classified stuff", delegate("a", "go"), last_result])
    a = ScriptedModel(["darn, done"])
    runtime, _ = runtime_for(tmp_path, main, {"scripted:a": a}, roles=[role("a")],
                             guards=[Guard(on_answer=clean_answer)])  # fmt: skip
    async with make_worker(convs.client, runtime, convs.task_queue):
        rewritten = await convs.send("guard-2", "say it")
        withheld = await convs.send("guard-2", "tell me")
        delegated = await convs.send("guard-2", "ask a")
        history = await convs.history("guard-2")
        await closed(convs, "guard-2")
    main.assert_done()
    a.assert_done()
    assert (rewritten.content, rewritten.stop_reason) == ("[redacted] it", "final")
    assert withheld.stop_reason == "refused"
    assert withheld.content.startswith("Stopped: the answer was withheld: ")
    assert "it is classified" in withheld.content
    assert delegated.content == "got: [redacted], done"  # (the session's answer, screened)
    said = [m.content for m in history if m.role == "assistant"]
    assert "[redacted] it" in said and not any("classified stuff" in s for s in said)
