"""What the lifecycle fuzz with messages and task claims (``benchmarks/team_fuzz.py``) found,
each minimised to a scripted scenario."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from subagent_kit import Kit, echo, make_kit

from retinue.engine import RunConfig
from retinue.engine.session import Session
from retinue.messages import ToolResultMessage, history_problems
from retinue.subagents import subagent_tools
from retinue.subagents.messaging import messenger_of
from retinue.subagents.tools import send_message
from retinue.testing import ScriptedModel, call_tool
from retinue.tools import ToolContext, ToolRegistry, tool

pytestmark = pytest.mark.timeout(120)  # a hang bound

HANG_AFTER = 30.0  # seconds: a deadlock never ends, these steps take moments (not a timing)


gate_open = asyncio.Event()


@tool("Gate")
async def gate(ctx: ToolContext) -> str:
    """Wait until the test opens the gate."""
    await gate_open.wait()
    return "gate passed"


@pytest.fixture
def kit(tmp_path: Path) -> Kit:
    gate_open.clear()
    return make_kit(tmp_path, "tester", extra_tools=[gate])


async def test_a_child_waiting_on_its_idle_parent_that_then_waits_on_it_does_not_hang(
    kit: Kit,
) -> None:
    """main starts tester in the background and ends its turn (idle). tester asks main with
    wait=true: main's next turn starts, and waits for tester's turn (SubAgentStatus with
    wait=true), which waits for main's reply. One of the two waits must end with an error."""
    main_model = ScriptedModel(name="scripted:main")
    main_model.add(
        call_tool(
            "SubAgent",
            {"task": "run the tests", "role": "tester", "interactive": True, "background": True},
        ),
        "tester runs",
        call_tool("SubAgentStatus", {"role": "tester", "wait": True}),
        "main done",
    )
    kit.models["tester"].add(
        call_tool("SendMessage", {"to": "main", "message": "may I skip some?", "wait": True}),
        "tests pass",
    )
    tools = ToolRegistry([*subagent_tools(), send_message])
    main = Session("main", RunConfig(main_model, [], tools, kit.ctx()))
    try:
        first = await main.send("go")
        assert first.content.startswith("tester runs")
        tester = kit.manager.registry.by_id("main/tester")
        assert tester is not None
        everything = asyncio.gather(tester.session.wait_background(), main.wait_background())
        done, _ = await asyncio.wait({everything}, timeout=HANG_AFTER)
        assert done, "tester waits for main's reply while main waits for tester's turn"
        waits = [m for m in tester.session.messages if isinstance(m, ToolResultMessage)]
        assert waits and (waits[0].is_error or waits[0].content.startswith("[reply from"))
    finally:
        await kit.manager.cleanup("main")
        await main.close()


async def test_a_turn_stopped_at_max_iterations_leaves_a_valid_history(kit: Kit) -> None:
    model = ScriptedModel(name="scripted:main")
    model.add(call_tool("Echo", {"text": "a"}), call_tool("Echo", {"text": "b"}), "never")
    tools = ToolRegistry([echo])
    main = Session("main", RunConfig(model, [], tools, kit.ctx(), max_iterations=2))
    try:
        out = await main.send("go")
        assert out.stop_reason == "max_iterations"
        assert history_problems(main.messages) == []
    finally:
        await main.close()


async def test_a_wait_on_a_working_sibling_that_then_asks_the_parent_does_not_hang(
    tmp_path: Path,
) -> None:
    """main starts tester (working: a gate) and reviewer in the background and waits for
    reviewer; reviewer messages tester with wait=true; tester then asks main. main waits for
    reviewer, reviewer for tester, tester for main: one of the waits must end."""
    kit = make_kit(tmp_path, "tester", "reviewer", extra_tools=[gate])
    main_model = ScriptedModel(name="scripted:main")
    main_model.add(
        call_tool(
            "SubAgent",
            {"task": "run the tests", "role": "tester", "interactive": True, "background": True},
        ),
        call_tool(
            "SubAgent",
            {"task": "review", "role": "reviewer", "interactive": True, "background": True},
        ),
        call_tool("SubAgentStatus", {"role": "reviewer", "wait": True}),
        "main done",
    )
    kit.models["reviewer"].add(
        call_tool("SendMessage", {"to": "tester", "message": "are they green?", "wait": True}),
        "reviewed",
    )
    kit.models["tester"].add(
        call_tool("Gate", {}),
        call_tool("AskParent", {"question": "which ones are slow?"}),
        "tests pass",
    )
    tools = ToolRegistry([*subagent_tools(), send_message])
    main = Session("main", RunConfig(main_model, [], tools, kit.ctx()))
    try:
        turn = asyncio.ensure_future(main.send("go"))
        while not messenger_of(kit.manager.registry).waiting():  # reviewer waits on tester
            await asyncio.sleep(0.01)
        gate_open.set()
        done, _ = await asyncio.wait({turn}, timeout=HANG_AFTER)
        assert done, "main waits for reviewer, reviewer for tester, tester for main's answer"
    finally:
        await kit.manager.cleanup("main")
        await main.close()
