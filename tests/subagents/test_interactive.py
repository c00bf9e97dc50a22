"""Interactive sessions: identity, multi-turn history, unload, ordering and parallelism."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from subagent_kit import Kit, make_kit

from heldmodel import HeldModel
from retinue.errors import SessionClosedError, SessionError, SubAgentError
from retinue.messages import AssistantMessage, SystemMessage, ToolResultMessage, UserMessage
from retinue.testing import call_tool

pytestmark = pytest.mark.timeout(60)  # a hang bound, not a timing


async def test_registry_create_find_delete(kit: Kit) -> None:
    kit.models["reviewer"].add("first look")
    out = await kit.manager.interactive_subagent(kit.ctx(), "review a.py", "reviewer")
    assert out.waiting_for_input and out.content == "first look"
    info = kit.manager.session("main/reviewer")
    assert info is not None and info.role == "reviewer" and info.turns == 1
    assert info.state == "idle"
    await kit.manager.unload_subagent("main", "reviewer")
    assert kit.manager.session("main/reviewer") is None
    assert kit.manager.sessions() == []


async def test_ids_are_unique_per_parent_and_instance(kit: Kit) -> None:
    kit.models["reviewer"].add("a", "b", "c", "d")
    m = kit.manager
    await m.interactive_subagent(kit.ctx("p1"), "t", "reviewer")
    await m.interactive_subagent(kit.ctx("p1"), "t again", "reviewer")  # same session
    await m.interactive_subagent(kit.ctx("p2"), "t", "reviewer")  # other parent
    await m.interactive_subagent(kit.ctx("p1"), "t", "reviewer", instance="second")
    ids = sorted(s.id for s in m.sessions())
    assert ids == ["p1/reviewer", "p1/reviewer:second", "p2/reviewer"]
    assert m.session("p1/reviewer").turns == 2  # type: ignore[union-attr]
    assert m.session("p2/reviewer").turns == 1  # type: ignore[union-attr]
    assert [s.id for s in m.sessions("p2")] == ["p2/reviewer"]


async def test_three_turns_then_unload_model_sees_whole_history(kit: Kit) -> None:
    model = kit.models["reviewer"]
    model.add(call_tool("Echo", {"text": "x"}), "reply 1", "reply 2", "reply 3")
    m, ctx = kit.manager, kit.ctx()
    replies = [
        (await m.interactive_subagent(ctx, f"turn {i}", "reviewer")).content for i in (1, 2, 3)
    ]
    assert replies == ["reply 1", "reply 2", "reply 3"]
    # turn 1 took two model calls (tool call, then answer); turns 2 and 3 one each
    assert len(model.calls) == 4
    last = model.calls[-1].messages
    assert isinstance(last[0], SystemMessage)
    assert [type(x).__name__ for x in last[1:]] == [
        "UserMessage",
        "AssistantMessage",
        "ToolResultMessage",
        "AssistantMessage",
        "UserMessage",
        "AssistantMessage",
        "UserMessage",
    ]
    assert [x.content for x in last if isinstance(x, UserMessage)] == ["turn 1", "turn 2", "turn 3"]
    tool_result = next(x for x in last if isinstance(x, ToolResultMessage))
    assert tool_result.content == "echo:x"
    # every request starts with the previous request's messages, unchanged (cache prefix)
    for before, after in zip(model.calls, model.calls[1:], strict=False):
        assert after.messages[: len(before.messages)] == before.messages
    assert not kit.memory.consolidated
    confirm = await m.unload_subagent("main", "reviewer")
    assert "main/reviewer" in confirm and "3 turn" in confirm
    [(role, sid, history)] = kit.memory.consolidated
    assert (role, sid) == ("reviewer", "main/reviewer")
    assert history[-1] == AssistantMessage("reply 3")


async def test_unload_unknown_session_is_a_clear_error(kit: Kit) -> None:
    kit.models["reviewer"].add("hi")
    await kit.manager.interactive_subagent(kit.ctx(), "t", "reviewer")
    with pytest.raises(SubAgentError, match=r"no interactive session 'main/tester'.*main/reviewer"):
        await kit.manager.unload_subagent("main", "tester")
    assert kit.manager.session("main/reviewer") is not None


async def test_concurrent_sends_to_one_session_run_in_arrival_order(kit: Kit) -> None:
    model = kit.models["reviewer"]
    model.delay = 0.02
    model.add("r1", "r2", "r3")
    ctx = kit.ctx()
    outs = await asyncio.gather(
        *(kit.manager.interactive_subagent(ctx, f"m{i}", "reviewer") for i in (1, 2, 3))
    )
    assert [o.content for o in outs] == ["r1", "r2", "r3"]
    users = [x.content for x in model.calls[-1].messages if isinstance(x, UserMessage)]
    assert users == ["m1", "m2", "m3"]
    # each call saw the previous turn's reply: the turns did not interleave
    assert [len(c.messages) for c in model.calls] == [2, 4, 6]
    assert kit.manager.session("main/reviewer").turns == 3  # type: ignore[union-attr]


@pytest.mark.timeout(120)  # a hang bound
async def test_sessions_of_different_roles_progress_in_parallel(tmp_path: Path) -> None:
    kit = make_kit(tmp_path, "reviewer", "researcher", model=HeldModel)
    running: set[str] = set()

    def waiting(name: str):
        def step(messages, tools):
            running.add(name)
            return "done"

        return step

    models = {name: kit.models[name] for name in ("reviewer", "researcher")}
    for name, model in models.items():
        model.add(waiting(name))
    ctx = kit.ctx()
    tasks = [
        asyncio.create_task(kit.manager.interactive_subagent(ctx, "go", name))
        for name in ("reviewer", "researcher")
    ]
    # both turns are inside their model call at the same moment: each call is held until
    # the other has begun (counted, not timed)
    states: dict[str, str] = {}
    for _ in range(30_000):  # a hang bound (30 s and more), polled
        states = {s.role: s.state for s in kit.manager.sessions()}
        if all(isinstance(m, HeldModel) and m.begun for m in models.values()):
            break
        await asyncio.sleep(0.001)
    assert states == {"reviewer": "running", "researcher": "running"}, states
    for model in models.values():
        assert isinstance(model, HeldModel)
        model.release.set()
    await asyncio.gather(*tasks)
    assert running == {"reviewer", "researcher"}


async def test_interrupt_cancels_the_turn_but_keeps_the_session(kit: Kit) -> None:
    model = kit.models["reviewer"]
    model.delay = 5.0
    model.add("never", "after")
    ctx = kit.ctx()
    turn = asyncio.create_task(kit.manager.interactive_subagent(ctx, "slow", "reviewer"))
    while kit.manager.session("main/reviewer") is None or not model.calls:
        await asyncio.sleep(0.001)
    assert kit.manager.interrupt("main/reviewer")
    out = await turn
    assert "interrupted" in out.content
    assert kit.manager.session("main/reviewer").state == "idle"  # type: ignore[union-attr]
    model.delay = 0
    out = await kit.manager.interactive_subagent(ctx, "again", "reviewer")
    assert out.content == "after"
    assert not kit.manager.interrupt("main/reviewer")  # nothing running now


async def test_unload_while_a_turn_runs_cancels_it_and_consolidates_once(kit: Kit) -> None:
    model = kit.models["reviewer"]
    model.add("hello")
    ctx = kit.ctx()
    await kit.manager.interactive_subagent(ctx, "hi", "reviewer")
    model.delay = 5.0
    model.add("never")
    turn = asyncio.create_task(kit.manager.interactive_subagent(ctx, "slow", "reviewer"))
    queued = asyncio.create_task(kit.manager.interactive_subagent(ctx, "queued", "reviewer"))
    while len(model.calls) < 2:
        await asyncio.sleep(0.001)
    await kit.manager.unload_subagent("main", "reviewer")
    ended = await turn
    assert ended.stop_reason == "interrupted" and "the session was closed" in ended.content
    with pytest.raises(SessionClosedError, match="closed before this message"):
        await queued
    assert kit.memory.sessions() == ["main/reviewer"]


async def test_role_limits_depth_and_cycles(tmp_path) -> None:
    spawn = frozenset({"spawn_agent"})
    k = make_kit(tmp_path, ("a", spawn), ("b", spawn), max_depth=1)
    deep = k.ctx().child(agent_id="main/a", role="a")
    with pytest.raises(SubAgentError, match="depth limit 1"):
        await k.manager.interactive_subagent(deep, "t", "b")
    k2 = make_kit(tmp_path, ("a", spawn), ("b", spawn))
    in_a = k2.ctx().child(agent_id="main/a", role="a")
    in_b = in_a.child(agent_id="main/a/b", role="b")
    with pytest.raises(SubAgentError, match="already in this call chain"):
        await k2.manager.interactive_subagent(in_b, "t", "a")
    assert k2.manager.sessions() == []


async def test_session_token_budget_refuses_further_turns(kit: Kit) -> None:
    kit.manager.session_token_budget = 1
    kit.models["reviewer"].add("first and last")
    ctx = kit.ctx()
    await kit.manager.interactive_subagent(ctx, "t", "reviewer")
    with pytest.raises(SessionError, match=r"has used \d+ tokens, its budget is 1: end it"):
        await kit.manager.interactive_subagent(ctx, "again", "reviewer")
    assert kit.manager.session("main/reviewer").turns == 1  # type: ignore[union-attr]
    await kit.manager.unload_subagent("main", "reviewer")
    assert kit.memory.sessions() == ["main/reviewer"]
