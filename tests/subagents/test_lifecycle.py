"""Parent-owned lifetimes: automatic cleanup, nesting, one-shot regression, tool errors."""

from __future__ import annotations

import asyncio

import pytest
from subagent_kit import Kit, make_kit

from retinue.errors import ModelError
from retinue.messages import ToolResultMessage, UserMessage
from retinue.testing import ScriptedModel, call_tool

pytestmark = pytest.mark.timeout(60)  # a hang bound, not a timing

SPAWN = frozenset({"spawn_agent"})


def results(out) -> list[ToolResultMessage]:
    return [m for m in out.messages if isinstance(m, ToolResultMessage)]


async def test_cleanup_when_parent_ends_normally(kit: Kit) -> None:
    kit.models["reviewer"].add("looked")
    kit.models["tester"].add("tested")
    main = ScriptedModel(
        [
            call_tool("SubAgent", {"task": "review", "role": "reviewer", "interactive": True}),
            call_tool("SubAgent", {"task": "test", "role": "tester", "interactive": True}),
            "all done",
        ]
    )
    out = await kit.run_main(main, "go")
    assert out.content == "all done"
    assert "looked" in results(out)[0].content and "waiting" in results(out)[0].content
    assert kit.manager.sessions() == []
    assert sorted(kit.memory.sessions()) == ["main/reviewer", "main/tester"]


async def test_cleanup_when_parent_fails(kit: Kit) -> None:
    kit.models["reviewer"].add("looked")
    main = ScriptedModel(
        [
            call_tool("SubAgent", {"task": "review", "role": "reviewer", "interactive": True}),
            ModelError("provider down"),
        ]
    )
    with pytest.raises(ModelError):
        await kit.run_main(main, "go")
    assert kit.manager.sessions() == []
    assert kit.memory.sessions() == ["main/reviewer"]


async def test_cleanup_when_parent_is_cancelled_mid_turn(kit: Kit) -> None:
    reviewer = kit.models["reviewer"]
    reviewer.add("first", "never")

    def second_send(messages, tools):
        reviewer.delay = 5.0  # the second turn hangs in its model call
        return call_tool("SubAgent", {"task": "two", "role": "reviewer", "interactive": True})

    main = ScriptedModel(
        [
            call_tool("SubAgent", {"task": "one", "role": "reviewer", "interactive": True}),
            second_send,
        ]
    )
    parent = asyncio.create_task(kit.run_main(main, "go"))
    while len(reviewer.calls) < 2:
        await asyncio.sleep(0.001)
    parent.cancel()
    with pytest.raises(asyncio.CancelledError):
        await parent
    assert kit.manager.sessions() == []
    [(_, sid, history)] = kit.memory.consolidated
    assert sid == "main/reviewer"
    assert [m.content for m in history if isinstance(m, UserMessage)] == ["one", "two"]


async def test_nested_sessions_three_deep_cascade_on_unload(tmp_path) -> None:
    k = make_kit(tmp_path, ("a", SPAWN), ("b", SPAWN), ("c", frozenset()))
    k.models["c"].add("c says hi", "c again")
    k.models["b"].add(
        call_tool("SubAgent", {"task": "hi c", "role": "c", "interactive": True}),
        "b paused",
        call_tool("SubAgent", {"task": "again c", "role": "c", "interactive": True}),
        "b again",
    )
    k.models["a"].add(
        call_tool("SubAgent", {"task": "hi b", "role": "b", "interactive": True}),
        "a paused",
        call_tool("SubAgent", {"task": "again b", "role": "b", "interactive": True}),
        "a again",
    )
    ctx = k.ctx()
    assert (await k.manager.interactive_subagent(ctx, "start", "a")).content == "a paused"
    ids = sorted(s.id for s in k.manager.sessions())
    assert ids == ["main/a", "main/a/b", "main/a/b/c"]  # children survive their parent's pause
    assert (await k.manager.interactive_subagent(ctx, "more", "a")).content == "a again"
    assert k.manager.session("main/a/b/c").turns == 2  # type: ignore[union-attr]
    await k.manager.unload_subagent("main", "a")
    assert k.manager.sessions() == []
    # children end before their parent; each consolidated exactly once
    assert k.memory.sessions() == ["main/a/b/c", "main/a/b", "main/a"]


async def test_one_shot_is_unchanged_without_interactive(kit: Kit) -> None:
    reviewer = kit.models["reviewer"]
    reviewer.add(call_tool("Echo", {"text": "q"}), "answer one", "answer two")
    main = ScriptedModel(
        [
            call_tool("SubAgent", {"task": "first", "role": "reviewer"}),
            call_tool("SubAgent", {"task": "second", "role": "reviewer"}),
            "done",
        ]
    )
    out = await kit.run_main(main, "go")
    assert [r.content for r in results(out)] == ["answer one", "answer two"]
    # the second call started a fresh conversation: system prompt + its task only
    assert [type(m).__name__ for m in reviewer.calls[-1].messages] == [
        "SystemMessage",
        "UserMessage",
    ]
    assert reviewer.calls[-1].messages[1] == UserMessage("second")
    assert kit.manager.sessions() == []
    assert len(kit.memory.consolidated) == 2
    assert all(sid.startswith("main/reviewer#") for sid in kit.memory.sessions())


async def test_errors_reach_the_model_as_results_and_disturb_nothing(tmp_path) -> None:
    k = make_kit(tmp_path, "reviewer", "main", tools=("Shout",))
    k.models["reviewer"].add("kept", call_tool("Echo", {"text": "x"}), "refused ok")
    main = ScriptedModel(
        [
            call_tool("SubAgent", {"task": "t", "role": "reviewer", "interactive": True}),
            call_tool("UnloadSubAgent", {"role": "tester"}),
            call_tool("SubAgent", {"task": "t", "role": "nobody"}),
            call_tool("SubAgent", {"task": "t", "role": "main"}),
            call_tool("SubAgent", {"task": "echo please", "role": "reviewer", "interactive": True}),
            "done",
        ]
    )
    out = await k.run_main(main, "go")
    _, unknown_session, unknown_role, cycle, second_turn = results(out)
    assert unknown_session.is_error
    assert "no interactive session 'main/tester'" in unknown_session.content
    assert unknown_role.is_error and "unknown role 'nobody'" in unknown_role.content
    assert cycle.is_error and "already in this call chain" in cycle.content
    # the reviewer may only use Shout (and, being interactive, AskParent and SendMessage):
    # Echo was not offered and its call was refused
    reviewer_calls = k.models["reviewer"].calls
    assert reviewer_calls[-1].tool_names == ["Shout", "AskParent", "SendMessage"]
    refusal = reviewer_calls[-1].messages[-1]
    assert isinstance(refusal, ToolResultMessage) and refusal.is_error
    assert "not allowed" in refusal.content
    assert "refused ok" in second_turn.content and not second_turn.is_error
    assert k.memory.sessions() == ["main/reviewer"]


async def test_depth_limit_reaches_the_model_as_an_error(tmp_path) -> None:
    k = make_kit(tmp_path, ("a", SPAWN), ("b", SPAWN), max_depth=1)
    k.models["a"].add(call_tool("SubAgent", {"task": "t", "role": "b"}), "a gave up")
    main = ScriptedModel([call_tool("SubAgent", {"task": "t", "role": "a"}), "done"])
    out = await k.run_main(main, "go")
    assert results(out)[0].content == "a gave up"
    inner = k.models["a"].calls[-1].messages[-1]
    assert isinstance(inner, ToolResultMessage) and inner.is_error
    assert "depth limit 1" in inner.content
