"""A failure the durable fuzz (``benchmarks/durable_fuzz.py``) found, minimised: letting go of
a tree (``suspend_tree``) while a sub-agent's background turn still works in it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from retinue.config import Settings
from retinue.durable import record_conversation, suspend_tree
from retinue.runtime import Runtime
from retinue.subagents import Role
from retinue.testing import ScriptedModel, call_tool
from retinue.tools import tool

pytestmark = pytest.mark.timeout(60)

AT_GATE = asyncio.Event()
THROUGH = asyncio.Event()
SLOW = asyncio.Event()


@tool("Gate")
async def gate() -> str:
    """Wait until the test lets this turn through."""
    AT_GATE.set()
    await THROUGH.wait()
    return "through"


@tool("Slow")
async def slow() -> str:
    """Work until cancelled, then take a while to stop (a cleanup)."""
    SLOW.set()
    try:
        await asyncio.get_running_loop().create_future()
    except asyncio.CancelledError:
        await asyncio.sleep(0.3)
        raise
    return "never"


ROLES = [
    Role("a", "opens b and c", "You are a.", ("Gate",), "scripted:a", frozenset({"spawn_agent"})),
    Role("b", "works slowly", "You are b.", ("Slow",), "scripted:b"),
    Role("c", "works slowly", "You are c.", ("Slow",), "scripted:c"),
]


@pytest.fixture(autouse=True)
def _fresh() -> None:
    for event in (AT_GATE, THROUGH, SLOW):
        event.clear()


async def test_a_session_opened_while_the_tree_is_let_go_of_is_let_go_of_too(
    tmp_path: Path,
) -> None:
    background = {"interactive": True, "background": True}
    models = {
        "main": ScriptedModel(
            [call_tool("SubAgent", {"role": "a", "task": "go", **background}), "a works"]
        ),
        "a": ScriptedModel(
            [
                call_tool("SubAgent", {"role": "b", "task": "work", **background}),
                call_tool("Gate"),
                call_tool("SubAgent", {"role": "c", "task": "work", **background}),
                "a done",
            ],
            name="scripted:a",
        ),
        "b": ScriptedModel([call_tool("Slow")], name="scripted:b"),
        "c": ScriptedModel([call_tool("Slow")], name="scripted:c"),
    }
    settings = Settings.load(home=tmp_path / "home", workspace=tmp_path)
    runtime = Runtime.create(
        settings,
        model=models["main"],
        model_for=lambda spec: models[spec.removeprefix("scripted:")],
        builtins=False,
        extra_tools=[gate, slow],
        roles=ROLES,
    )
    assert runtime.memory is not None
    conversation = runtime.conversation("conv-c1", keep_sessions=True)
    record_conversation(conversation, runtime.memory.journal, "default")
    assert (await conversation.send("go")).content == "a works"
    await asyncio.wait_for(asyncio.gather(AT_GATE.wait(), SLOW.wait()), 30)
    models["a"].delay = 0.1  # a's next model call ends while b is still stopping (0.3 s)
    THROUGH.set()
    await suspend_tree(conversation)  # a's turn opens c while b stops, before a is let go of
    left = [s.id for s in runtime.manager.sessions()]
    try:
        assert left == []
    finally:
        for held in list(runtime.manager.registry.held_by(None)):
            await held.session.close()
