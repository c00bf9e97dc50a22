"""``retinue mcp serve`` bounds what a client sends that nothing else bounds over stdio (the
``SubAgent`` task, an answer to a question), and asks an approval through the call or task
whose sub-agent needs it when one client runs several (issue 41)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, types
from test_mcp_serve_protocol import asking_model, runtime_for, text

from retinue.mcp.server.serve import APPROVAL_KEY, MAX_TASK_CHARS, Approvals, build_server
from retinue.policy.approvals import ApprovalRequest

pytestmark = pytest.mark.timeout(30)


async def test_an_overlong_task_is_refused_before_any_model_call(tmp_path: Path) -> None:
    model = asking_model()
    server = build_server(runtime_for(tmp_path, model))
    async with Client(server, mode="legacy") as client:
        long = await client.call_tool("SubAgent", {"task": "x" * (MAX_TASK_CHARS + 1),
                                                   "role": "asker"})  # fmt: skip
        assert long.is_error and str(MAX_TASK_CHARS) in text(long)
        assert model.calls == []
        fits = await client.call_tool("SubAgent", {"task": "paint", "role": "asker"})
    assert not fits.is_error and "Which colour?" in text(fits)  # the bound, not a refusal


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_an_overlong_answer_is_not_taken_and_the_question_stays(
    tmp_path: Path, mode: str
) -> None:
    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"answer": "y" * (MAX_TASK_CHARS + 1)})

    model = asking_model()
    server = build_server(runtime_for(tmp_path, model))
    async with Client(server, elicitation_callback=elicit, mode=mode) as client:
        result = await client.call_tool("SubAgent", {"task": "paint", "role": "asker"})
    assert "asks: Which colour?" in text(result)  # the note: answer it with SubAgent
    assert len(model.calls) == 1  # the over-long answer never reached the sub-agent


def request(agent_id: str) -> ApprovalRequest:
    return ApprovalRequest("r1", agent_id, "scribe", 1, "Write", "{}", "default mode", "")


async def test_an_approval_is_asked_through_the_task_whose_sub_agent_asks() -> None:
    """Two tasks of one client run at once; the first one's sub-agent (a turn started in its
    context) needs an approval after the second began: the first task is asked."""
    approvals = Approvals()
    asked: dict[str, list[dict[str, Any]]] = {"first": [], "second": []}
    second_running, second_done = asyncio.Event(), asyncio.Event()

    def asker(name: str):
        async def ask(requests: dict[str, Any]) -> dict[str, Any]:
            asked[name].append(requests)
            return {APPROVAL_KEY: {"action": "accept", "content": {"allow": True}}}

        return ask

    async def sub_agent_turn(agent_id: str) -> bool:
        await second_running.wait()
        return (await approvals(request(agent_id))).allow

    async def first() -> bool:
        with approvals.calling(asker("first")):
            turn = asyncio.create_task(sub_agent_turn("mcp-client/scribe#1"))  # (its context)
            allowed = await turn
            second_done.set()
            return allowed

    async def second() -> None:
        with approvals.calling(asker("second")):
            second_running.set()
            await second_done.wait()

    allowed, _ = await asyncio.gather(first(), second())
    assert allowed
    assert len(asked["first"]) == 1 and asked["second"] == []


async def test_a_turn_whose_call_has_ended_is_asked_through_the_latest_call() -> None:
    approvals = Approvals()
    asked: list[str] = []
    ended = asyncio.Event()

    async def ask(requests: dict[str, Any]) -> dict[str, Any]:
        asked.append("live")
        return {APPROVAL_KEY: {"action": "accept", "content": {"allow": True}}}

    async def background_turn() -> bool:
        await ended.wait()
        return (await approvals(request("mcp-client/scribe"))).allow

    async def gone(requests: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("asked through a call that has ended")

    with approvals.calling(gone):
        turn = asyncio.create_task(background_turn())
    with approvals.calling(ask):
        ended.set()
        assert await turn
    assert asked == ["live"]
