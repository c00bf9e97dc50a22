"""Failures the durable fuzz (``benchmarks/durable_fuzz.py``) found, each minimised to a test.

A "process death" is simulated as in ``test_durable.py``: the records stay as last written
(here the journal drops the writes a dead process would not have made), and a second
runtime on the same data folder restores the tree."""

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
)
from retinue.events import CONSOLIDATED, Event
from retinue.messages import AssistantMessage, Message, ToolResultMessage, UserMessage
from retinue.runtime import Conversation, Runtime
from retinue.store.journal import SessionRecord
from retinue.subagents import Role
from retinue.testing import ScriptedModel, call_tool
from retinue.tools import tool

pytestmark = pytest.mark.timeout(60)

SID = "conv-c1/worker"


@tool("Bump")
async def bump(label: str) -> str:
    """Do something that must not be done twice."""
    return f"bumped {label}"


MEMORIZE = call_tool("memorize", {"block_updates": [], "new_passages": ["paint dries"]})


def consolidated(events: list[Event]) -> list[str]:
    """The sessions whose consolidation was written, once per write."""
    return [e.agent_id for e in events if e.kind == CONSOLIDATED and e.data["ok"]]


WORKER = Role("worker", "does work", "You work.", ("Bump", "AskParent"), "scripted:worker")


class Process:
    """One "process": a runtime on the shared data folder, its main conversation."""

    def __init__(
        self, tmp_path: Path, main: ScriptedModel, worker: ScriptedModel, events: list[Event]
    ) -> None:
        settings = Settings.load(home=tmp_path / "home", workspace=tmp_path)
        self.runtime = Runtime.create(
            settings,
            model=main,
            model_for=lambda _spec: worker,
            events=events.append,
            builtins=False,
            extra_tools=[bump],
            roles=[WORKER],
        )
        assert self.runtime.memory is not None
        self.journal = self.runtime.memory.journal
        self.conversation: Conversation = self.runtime.conversation("conv-c1", keep_sessions=True)


async def test_a_close_cut_between_consolidation_and_forget_consolidates_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[Event] = []
    ask = {"role": "worker", "interactive": True, "task": "work"}
    first = Process(
        tmp_path,
        ScriptedModel([call_tool("SubAgent", ask), "it worked"]),
        ScriptedModel(["worked", MEMORIZE], name="scripted:worker"),
        events,
    )
    record_conversation(first.conversation, first.journal, "default")

    async def died_before(tenant: str, session_id: str) -> bool:
        return False  # the process died before this write

    monkeypatch.setattr(first.journal, "forget", died_before)
    await first.conversation.send("go")
    await first.conversation.close()  # the worker consolidates; then the process dies
    assert consolidated(events) == [SID]
    stored = await first.journal.load("default", SID)
    assert stored is not None and stored[0].state == "closing"

    second = Process(
        tmp_path, ScriptedModel(), ScriptedModel([MEMORIZE], name="scripted:worker"), events
    )
    await restore_conversation(second.conversation, second.journal, "default", None)
    await second.conversation.close()
    assert await second.journal.load_tree("default", "conv-c1") == []
    assert consolidated(events) == [SID]  # once, over both processes


async def test_a_message_sent_to_a_revived_session_that_then_asks_is_not_stuck(
    tmp_path: Path,
) -> None:
    events: list[Event] = []
    worker = ScriptedModel(
        [call_tool("AskParent", {"question": "which colour?"}), "painted blue"],
        name="scripted:worker",
        delay=0.2,  # the parent's message arrives while the revived turn is still working
    )
    main = ScriptedModel(
        [call_tool("SubAgent", {"role": "worker", "interactive": True, "task": "blue"}), "ok"]
    )
    process = Process(tmp_path, main, worker, events)
    history: list[Message] = [UserMessage("paint"), AssistantMessage("it paints")]
    await process.journal.record(
        "default", SessionRecord("conv-c1", "conv-c1", None, "main", "main"), history
    )
    child = SessionRecord(SID, "conv-c1", "conv-c1", "interactive", "worker", state="running")
    cut = [UserMessage("paint it"), call_tool("Bump", {"label": "red"}, id="b1")]
    await process.journal.record("default", child, cut)
    restored = await restore_conversation(process.conversation, process.journal, "default", None)
    (revived,) = restored.revived.resumed
    assert revived.messages[2] == ToolResultMessage("b1", "Bump", RESTARTED_RESULT, True)
    try:
        out = await asyncio.wait_for(process.conversation.send("blue, please"), 30)
    finally:
        await suspend_tree(process.conversation)
    assert out.content == "ok"
