"""Background interactive sessions: the parent goes on and polls for the reply."""

from __future__ import annotations

import asyncio

import pytest
from subagent_kit import Kit

from retinue.errors import SubAgentError
from retinue.messages import ToolResultMessage
from retinue.testing import ScriptedModel, call_tool

pytestmark = pytest.mark.timeout(60)  # a hang bound, not a timing


async def test_background_turn_runs_while_the_parent_goes_on(kit: Kit) -> None:
    reviewer = kit.models["reviewer"]
    reviewer.delay = 0.2
    reviewer.add("review done")
    ctx = kit.ctx()
    text = await kit.manager.delegate(
        ctx, task="review", role="reviewer", interactive=True, background=True
    )
    assert "working on it in the background" in text
    info = kit.manager.session("main/reviewer")
    assert info is not None and info.background == 1
    early = await kit.manager.poll(ctx, "reviewer")
    assert "1 background turn(s) still to finish" in early and "no new replies" in early
    done = await kit.manager.poll(ctx, "reviewer", wait=True)
    assert "idle, 1 turn(s) done" in done and "[1] review done" in done
    assert "no new replies" in await kit.manager.poll(ctx, "reviewer")


async def test_main_agent_delegates_in_background_and_collects_through_tools(kit: Kit) -> None:
    kit.models["reviewer"].add("a.py looks fine")
    kit.models["tester"].add("tests pass")
    bg = {"interactive": True, "background": True}
    main = ScriptedModel(
        [
            call_tool("SubAgent", {"task": "review a.py", "role": "reviewer", **bg}),
            call_tool("SubAgent", {"task": "run tests", "role": "tester", **bg}),
            call_tool("SubAgentStatus", {"role": "reviewer", "wait": True}),
            call_tool("SubAgentStatus", {"role": "tester", "wait": True}),
            "both done",
        ]
    )
    out = await kit.run_main(main, "go")
    results = [m.content for m in out.messages if isinstance(m, ToolResultMessage)]
    assert "a.py looks fine" in results[2] and "tests pass" in results[3]
    assert kit.manager.sessions() == []
    assert sorted(kit.memory.sessions()) == ["main/reviewer", "main/tester"]


async def test_parent_end_cancels_a_background_turn_and_consolidates_once(kit: Kit) -> None:
    reviewer = kit.models["reviewer"]
    reviewer.delay = 30
    reviewer.add("never")
    main = ScriptedModel([
        call_tool("SubAgent", {"task": "slow", "role": "reviewer", "interactive": True,
                               "background": True}),
        "not waiting for it",
    ])  # fmt: skip
    out = await kit.run_main(main, "go")
    assert out.content == "not waiting for it"
    assert kit.manager.sessions() == []
    assert kit.memory.sessions() == ["main/reviewer"]
    leftover = [t for t in asyncio.all_tasks() if t.get_name().startswith("background")]
    assert leftover == []


async def test_background_needs_an_interactive_session(kit: Kit) -> None:
    with pytest.raises(SubAgentError, match="need interactive=true"):
        await kit.manager.delegate(kit.ctx(), task="t", role="reviewer", background=True)
    with pytest.raises(SubAgentError, match="no interactive session 'main/reviewer'"):
        await kit.manager.poll(kit.ctx(), "reviewer")
