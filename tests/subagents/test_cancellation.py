"""Sessions under cancellation, faults and races: one regression test per defect of issue 11."""

from __future__ import annotations

import asyncio

import pytest
from subagent_kit import Kit, make_kit

from retinue.errors import ModelError, SessionError, SubAgentError
from retinue.events import CONSOLIDATED, Event
from retinue.messages import ToolResultMessage, UserMessage, history_problems
from retinue.testing import ScriptedModel, call_tool, call_tools

pytestmark = pytest.mark.timeout(60)  # a hang bound, not a timing

SPAWN = frozenset({"spawn_agent"})
A = {"task": "hi", "role": "a", "interactive": True}


async def until(condition) -> None:
    for _ in range(5000):
        if condition():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("condition never held")


def nested(tmp_path) -> Kit:
    """main -> a -> b, both interactive, b idle and held by a."""
    k = make_kit(tmp_path, ("a", SPAWN), ("b", frozenset()))
    k.models["b"].add("b here")
    k.models["a"].add(
        call_tool("SubAgent", {"task": "hi b", "role": "b", "interactive": True}), "a paused"
    )
    return k


# 1. close is owned and shielded: it finishes when its caller is cancelled, exactly once


async def test_unload_finishes_when_its_caller_is_cancelled(tmp_path) -> None:
    k = nested(tmp_path)
    await k.manager.interactive_subagent(k.ctx(), "start", "a")
    k.memory.consolidate_delay = 0.05
    unload = asyncio.create_task(k.manager.unload_subagent("main", "a"))
    await until(lambda: "main/a/b" in k.memory.started)
    unload.cancel()  # while the child consolidates
    with pytest.raises(asyncio.CancelledError):
        await unload
    # the caller saw its cancellation only once the close had finished
    assert k.memory.sessions() == ["main/a/b", "main/a"]
    assert k.manager.sessions() == []


async def test_cleanup_cancelled_at_once_still_closes_every_session(tmp_path) -> None:
    k = make_kit(tmp_path, "a", "b")
    k.models["a"].add("a1")
    k.models["b"].add("b1")
    await k.manager.interactive_subagent(k.ctx(), "t", "a")
    await k.manager.interactive_subagent(k.ctx(), "t", "b")
    k.memory.consolidate_delay = 0.02
    cleanup = asyncio.create_task(k.manager.cleanup("main"))
    await asyncio.sleep(0)  # the cleanup has begun: every close with it
    for _ in range(3):
        cleanup.cancel()
        await asyncio.sleep(0.001)
    with pytest.raises(asyncio.CancelledError):
        await cleanup
    assert sorted(k.memory.sessions()) == ["main/a", "main/b"]
    assert k.manager.sessions() == []


async def test_concurrent_unloads_and_cleanup_consolidate_once(tmp_path) -> None:
    k = nested(tmp_path)
    await k.manager.interactive_subagent(k.ctx(), "start", "a")
    k.memory.consolidate_delay = 0.01
    first, second, ended = await asyncio.gather(
        k.manager.unload_subagent("main", "a"),
        k.manager.unload_subagent("main", "a"),
        k.manager.cleanup("main"),
    )
    assert first == second and "consolidated" in first
    assert ended == ["main/a"]
    assert k.memory.sessions() == ["main/a/b", "main/a"]


# 2. no ghost turn: an unload during the first turn's prompt rendering ends it for good


async def test_unload_during_the_first_prompt_render_leaves_no_ghost_turn(tmp_path) -> None:
    k = nested(tmp_path)
    k.memory.render_delay = 0.05
    main = ScriptedModel([call_tools(("SubAgent", A), ("UnloadSubAgent", {"role": "a"})), "done"])
    out = await k.run_main(main, "go")
    spawn, unload = [m for m in out.messages if isinstance(m, ToolResultMessage)]
    assert spawn.is_error and "closed before this message" in spawn.content
    assert "nothing to consolidate" in unload.content and not unload.is_error  # (issue 25)
    assert k.models["a"].call_count == 0  # the turn never ran on the unloaded session
    assert k.memory.sessions() == ["main/a"]
    assert k.manager.sessions() == []


# 3. an interrupt stops a turn; it never aborts a child's consolidation


async def test_interrupting_a_parent_does_not_abort_its_childs_consolidation(tmp_path) -> None:
    k = nested(tmp_path)
    await k.manager.interactive_subagent(k.ctx(), "start", "a")
    k.models["a"].add(call_tool("UnloadSubAgent", {"role": "b"}), "never said")
    k.memory.consolidate_delay = 0.05
    turn = asyncio.create_task(k.manager.interactive_subagent(k.ctx(), "unload b", "a"))
    await until(lambda: "main/a/b" in k.memory.started)
    assert k.manager.interrupt("main/a")
    out = await turn
    assert out.stop_reason == "interrupted"
    assert k.memory.sessions() == ["main/a/b"]  # finished, not cut short
    assert [s.id for s in k.manager.sessions()] == ["main/a"]
    assert history_problems(k.manager.history("main/a")) == []


# 4. instance names are checked like role names; sessions are keyed structurally


@pytest.mark.parametrize("instance", ["x/b", "x:y", "../a", " x", "x\n"])
async def test_an_instance_that_could_forge_another_id_is_refused(kit: Kit, instance) -> None:
    with pytest.raises(SubAgentError, match="invalid instance name"):
        await kit.manager.delegate(
            kit.ctx(), task="t", role="reviewer", interactive=True, instance=instance
        )
    with pytest.raises(SubAgentError, match="invalid instance name"):
        await kit.manager.unload_subagent("main", "reviewer", instance)
    assert kit.manager.sessions() == []


async def test_a_parent_cannot_reach_a_session_it_does_not_hold(tmp_path) -> None:
    k = nested(tmp_path)
    await k.manager.interactive_subagent(k.ctx(), "start", "a")
    # main/a/b is held by main/a: from main it is unknown under any spelling
    with pytest.raises(SubAgentError, match="no interactive session 'main/b'"):
        await k.manager.unload_subagent("main", "b")
    with pytest.raises(SubAgentError, match="invalid instance name"):
        await k.manager.unload_subagent("main", "a", "x/b")
    assert sorted(s.id for s in k.manager.sessions()) == ["main/a", "main/a/b"]


# 5. arrival order holds for background and foreground sends alike


@pytest.mark.parametrize("existing", [False, True])
async def test_a_background_send_before_a_foreground_one_runs_first(kit: Kit, existing) -> None:
    model = kit.models["reviewer"]
    ctx = kit.ctx()
    if existing:
        model.add("hello")
        await kit.manager.interactive_subagent(ctx, "hello", "reviewer")
    model.add("r-first", "r-second")
    kit.manager.start_background(ctx, "first", "reviewer")
    out = await kit.manager.interactive_subagent(ctx, "second", "reviewer")
    assert out.content == "r-second"
    asked = [c.messages[-1].content for c in model.calls]
    assert asked[-2:] == ["first", "second"]
    assert "[1] r-first" in await kit.manager.poll(ctx, "reviewer")


# 6. every history stays valid for the next turn, whatever happened


async def test_a_waiter_cancelled_mid_turn_leaves_a_valid_history(kit: Kit) -> None:
    model = kit.models["reviewer"]
    model.add("first")
    ctx = kit.ctx()
    await kit.manager.interactive_subagent(ctx, "one", "reviewer")
    model.delay = 5
    model.add("never")
    waiter = asyncio.create_task(kit.manager.interactive_subagent(ctx, "two", "reviewer"))
    await until(lambda: len(model.calls) == 2)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert history_problems(kit.manager.history("main/reviewer")) == []
    model.delay = 0
    model.add("third")
    await kit.manager.interactive_subagent(ctx, "three", "reviewer")
    sent = model.calls[-1].messages
    assert history_problems([*sent, *kit.manager.history("main/reviewer")[len(sent) :]]) == []


async def test_a_failed_model_call_leaves_a_valid_history(kit: Kit) -> None:
    model = kit.models["reviewer"]
    model.add(call_tool("Echo", {"text": "x"}), ModelError("provider down"), "recovered")
    ctx = kit.ctx()
    with pytest.raises(ModelError):
        await kit.manager.interactive_subagent(ctx, "one", "reviewer")
    history = kit.manager.history("main/reviewer")
    assert history_problems(history) == []
    assert "failed before it finished: ModelError: provider down" in history[-1].content
    out = await kit.manager.interactive_subagent(ctx, "two", "reviewer")
    assert out.content == "recovered"
    users = [m for m in model.calls[-1].messages if isinstance(m, UserMessage)]
    assert [u.content for u in users] == ["one", "two"]


def test_history_problems_names_what_is_wrong() -> None:
    from retinue.messages import AssistantMessage, SystemMessage, ToolCall

    call = AssistantMessage("", (ToolCall("c1", "Echo"),))
    assert history_problems([SystemMessage("s"), UserMessage("a"), AssistantMessage("b")]) == []
    assert (
        "before the previous one was answered"
        in history_problems([UserMessage("a"), UserMessage("b"), AssistantMessage("c")])[0]
    )
    assert "left without a result" in history_problems([UserMessage("a"), call])[0]
    assert "never answered" in history_problems([UserMessage("a")])[0]


# 7. budgets count every turn; blank tasks are refused; confirmations tell the truth


@pytest.mark.parametrize("ending", ["failed", "interrupted"])
async def test_failed_and_interrupted_turns_count_against_the_budget(kit: Kit, ending) -> None:
    model = kit.models["reviewer"]
    kit.manager.session_token_budget = 1
    ctx = kit.ctx()
    if ending == "failed":
        model.add(call_tool("Echo", {"text": "x"}), ModelError("down"))
        with pytest.raises(ModelError):
            await kit.manager.interactive_subagent(ctx, "one", "reviewer")
    else:

        def slow_down(messages, tools):
            model.delay = 5  # the next call hangs until it is interrupted
            return call_tool("Echo", {"text": "x"})

        model.add(slow_down, "never")
        turn = asyncio.create_task(kit.manager.interactive_subagent(ctx, "one", "reviewer"))
        await until(lambda: len(model.calls) == 2)
        assert kit.manager.interrupt("main/reviewer")
        assert (await turn).stop_reason == "interrupted"
    info = kit.manager.session("main/reviewer")
    assert info is not None and info.tokens > 0 and info.turns == 0
    with pytest.raises(SessionError, match="its budget is 1"):
        await kit.manager.interactive_subagent(ctx, "again", "reviewer")


@pytest.mark.parametrize("task", ["", "   ", "\n\t"])
async def test_a_blank_task_is_refused(kit: Kit, task) -> None:
    for interactive in (False, True):
        with pytest.raises(SubAgentError, match="the task is empty"):
            await kit.manager.delegate(
                kit.ctx(), task=task, role="reviewer", interactive=interactive
            )
    assert kit.manager.sessions() == [] and kit.models["reviewer"].call_count == 0


async def test_unload_says_when_consolidation_failed(kit: Kit) -> None:
    events: list[Event] = []
    kit.models["reviewer"].add("hi")
    ctx = kit.ctx()
    from dataclasses import replace

    ctx = replace(ctx, events=events.append)
    await kit.manager.interactive_subagent(ctx, "t", "reviewer")
    kit.memory.fail = True
    confirm = await kit.manager.unload_subagent("main", "reviewer")
    assert "consolidating its memory failed" in confirm and "was consolidated" not in confirm
    [done] = [e for e in events if e.kind == CONSOLIDATED]
    assert done.data["ok"] is False and "retinue memory retry" in done.data["error"]


async def test_unload_without_memory_says_nothing_was_kept(tmp_path) -> None:
    k = make_kit(tmp_path, "reviewer")
    k.manager.factory.memory = None
    k.models["reviewer"].add("hi")
    await k.manager.interactive_subagent(k.ctx(), "t", "reviewer")
    confirm = await k.manager.unload_subagent("main", "reviewer")
    assert "no memory is configured" in confirm and "consolidated" not in confirm
