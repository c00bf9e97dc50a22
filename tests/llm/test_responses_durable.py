"""A durable restart mid-turn on an emulated gpt-5.6-terra over the Responses API: the turn in
progress is recorded with its reasoning items, the process dies between two tool calls, and
the second process sends them back (from the journal) so its first request is not refused."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from retinue.config import Settings
from retinue.durable import (
    RESTARTED_RESULT,
    record_conversation,
    restore_conversation,
    suspend_tree,
    tree_settled,
)
from retinue.llm.loopback_responses import LoopbackResponsesServer
from retinue.llm.openai_responses import OpenAIResponsesModel
from retinue.messages import AssistantMessage, ToolResultMessage, history_problems
from retinue.runtime import Conversation, Runtime
from retinue.testing import ScriptedModel, call_tool
from retinue.tools import ToolContext, tool

pytestmark = pytest.mark.timeout(60)

DONE: list[str] = []
BLOCKED: list[asyncio.Event] = []


@tool("Bump")
def bump(ctx: ToolContext, label: str) -> str:
    """Do something that must not be done twice."""
    DONE.append(label)
    return f"bumped {label}"


@tool("Block")
async def block(ctx: ToolContext) -> str:
    """Work until the process dies."""
    BLOCKED[-1].set()
    await asyncio.get_running_loop().create_future()
    return "never"


def _process(tmp_path: Path, model: OpenAIResponsesModel) -> tuple[Runtime, Conversation]:
    settings = Settings.load(home=tmp_path / "home", workspace=tmp_path)
    runtime = Runtime.create(settings, model=model, extra_tools=[bump, block])
    return runtime, runtime.conversation("conv-r1", keep_sessions=True)


async def test_a_restart_mid_turn_replays_the_recorded_reasoning(tmp_path: Path) -> None:
    DONE.clear()
    BLOCKED.append(asyncio.Event())
    script = ScriptedModel([call_tool("Bump", {"label": "one"}), call_tool("Block"), "finished"])
    with LoopbackResponsesServer(script) as server:
        model = OpenAIResponsesModel("gpt-5.6-terra", base_url=server.base_url, max_retries=0)
        runtime, first = _process(tmp_path, model)
        assert runtime.memory is not None
        record_conversation(first, runtime.memory.journal, "default")
        turn = asyncio.create_task(first.send("go"))
        await asyncio.wait_for(BLOCKED[-1].wait(), 30)
        await suspend_tree(first)  # the process dies here
        assert turn.done()

        runtime, second = _process(tmp_path, model)
        assert runtime.memory is not None
        await restore_conversation(second, runtime.memory.journal, "default", None)
        await tree_settled(second)
        await model.aclose()
    assert server.rejected == []
    assert DONE == ["one"]
    history = second.messages
    final = history[-1]
    assert isinstance(final, AssistantMessage) and final.content == "finished"
    assert history_problems(history) == []
    cut = [m for m in history if isinstance(m, ToolResultMessage) and m.name == "Block"]
    assert len(cut) == 1 and cut[0].content == RESTARTED_RESULT
    # the request after the restart replayed both reasoning items of the turn in progress
    last = server.requests[-1]["input"]
    assert [i.get("type") for i in last].count("reasoning") == 2
