"""Durable sessions (retinue.durable): a tree recorded at each step, let go of as a process
that dies would (``suspend_tree``: nothing ended, nothing consolidated, the records as last
written), and rebuilt by a second runtime on the same store. No step is done twice; a
question asked before the "restart" is answered after it; a closing session consolidates
once; a read cut short runs again."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from retinue.config import Settings
from retinue.durable import (
    RESTARTED_RESULT,
    record_conversation,
    restore_conversation,
    settle_calls,
    suspend_tree,
    tree_settled,
)
from retinue.engine.pause import Question
from retinue.events import CONSOLIDATED, Event
from retinue.messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    history_problems,
)
from retinue.runtime import Conversation, Runtime
from retinue.store.journal import SessionRecord
from retinue.subagents import Role
from retinue.testing import ScriptedModel, call_tool, call_tools
from retinue.tools import ToolContext, ToolRegistry, tool
from retinue.tools.builtin import read_tool, write_tool

pytestmark = pytest.mark.timeout(60)

SIDE_EFFECTS: list[str] = []
BLOCKED = asyncio.Event()


@tool("Bump")
def bump(ctx: ToolContext, label: str) -> str:
    """Do something that must not be done twice."""
    SIDE_EFFECTS.append(label)
    return f"bumped {label}"


@tool("Block")
async def block(ctx: ToolContext) -> str:
    """Work until the process dies."""
    BLOCKED.set()
    await asyncio.get_running_loop().create_future()
    return "never"


WORKER = Role("worker", "does work", "You work.", ("Bump", "Block", "AskParent"), "scripted:worker")


class Process:
    """One "process": a runtime on the shared data directory, its main conversation."""

    def __init__(self, tmp_path: Path, main: ScriptedModel, worker: ScriptedModel) -> None:
        self.events: list[Event] = []
        settings = Settings.load(home=tmp_path / "home", workspace=tmp_path)
        self.runtime = Runtime.create(
            settings,
            model=main,
            model_for=lambda _spec: worker,
            events=self.events.append,
            extra_tools=[bump, block],
            roles=[WORKER],
        )
        assert self.runtime.memory is not None
        self.journal = self.runtime.memory.journal
        self.conversation: Conversation = self.runtime.conversation("conv-c1", keep_sessions=True)

    def consolidations(self) -> list[str]:
        return [e.agent_id for e in self.events if e.kind == CONSOLIDATED]


@pytest.fixture(autouse=True)
def _fresh() -> None:
    global BLOCKED
    SIDE_EFFECTS.clear()
    BLOCKED = asyncio.Event()  # (one per test: an event belongs to its loop)


async def test_a_turn_cut_between_tool_calls_goes_on_with_no_step_done_twice(
    tmp_path: Path,
) -> None:
    first = Process(
        tmp_path,
        ScriptedModel([call_tool("Bump", {"label": "one"}), call_tool("Block"), "unreached"]),
        ScriptedModel(name="scripted:worker"),
    )
    record_conversation(first.conversation, first.journal, "default")
    turn = asyncio.create_task(first.conversation.send("go"))
    await asyncio.wait_for(BLOCKED.wait(), 30)
    recorded = await first.journal.load("default", "conv-c1")
    assert recorded is not None and recorded[0].state == "running"
    assert [m.role for m in recorded[1]][-3:] == ["assistant", "tool", "assistant"]
    await suspend_tree(first.conversation)  # the process dies here
    assert turn.done()

    main = ScriptedModel(["finished"])
    second = Process(tmp_path, main, ScriptedModel(name="scripted:worker"))
    restored = await restore_conversation(second.conversation, second.journal, "default", None)
    assert restored.state == "running"
    await tree_settled(second.conversation)
    assert SIDE_EFFECTS == ["one"]  # Bump ran once; Block was not run again
    history = second.conversation.messages
    assert history[-1] == AssistantMessage("finished")
    cut = [m for m in history if isinstance(m, ToolResultMessage) and m.name == "Block"]
    assert len(cut) == 1 and cut[0].content == RESTARTED_RESULT and cut[0].is_error
    assert history_problems(history) == []
    assert main.calls[0].messages[-1] == cut[0]  # the model was told, and went on
    stored = await second.journal.load("default", "conv-c1")
    assert stored is not None and stored[0].state == "idle" and len(stored[1]) == len(history)


async def test_a_read_cut_short_runs_again_and_other_calls_do_not(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha")
    step = call_tools(("Read", {"file_path": "a.txt"}), ("Write", {"file_path": "b.txt",
                      "content": "x"}))  # fmt: skip
    messages: list[Message] = [UserMessage("go"), step]
    parked, again = settle_calls(messages, ToolRegistry([read_tool, write_tool]))
    assert parked is None and again
    assert [(m.name, m.content) for m in messages[2:]] == [("Write", RESTARTED_RESULT)]  # type: ignore[union-attr]

    process = Process(tmp_path, ScriptedModel(["read it"]), ScriptedModel(name="scripted:worker"))
    record = SessionRecord("conv-c1", "conv-c1", None, "main", "main", state="running")
    await process.journal.record("default", record, [UserMessage("go"), step])
    await restore_conversation(process.conversation, process.journal, "default", None)
    await tree_settled(process.conversation)
    results = {m.name: m.content for m in process.conversation.messages
               if isinstance(m, ToolResultMessage)}  # fmt: skip
    assert "alpha" in results["Read"] and results["Write"] == RESTARTED_RESULT
    assert not (tmp_path / "b.txt").exists()
    assert process.conversation.messages[-1] == AssistantMessage("read it")


async def test_a_sub_agents_question_outlives_the_process_and_is_answered_after(
    tmp_path: Path,
) -> None:
    ask = {"role": "worker", "interactive": True, "task": "paint it"}
    first = Process(
        tmp_path,
        ScriptedModel([call_tool("SubAgent", ask), "it asks which colour"]),
        ScriptedModel([call_tool("AskParent", {"question": "which colour?"})], name="s:w"),
    )
    record_conversation(first.conversation, first.journal, "default")
    out = await first.conversation.send("paint")
    assert out.content == "it asks which colour"
    sid = "conv-c1/worker"
    assert first.runtime.manager.session(sid) is not None
    await suspend_tree(first.conversation)  # a deploy: nothing consolidated
    assert first.consolidations() == []
    assert first.runtime.manager.session(sid) is None

    worker = ScriptedModel([call_tool("Bump", {"label": "blue"}), "painted blue"], name="s:w")
    second = Process(tmp_path, ScriptedModel(), worker)
    await restore_conversation(second.conversation, second.journal, "default", None)
    info = second.runtime.manager.session(sid)
    assert info is not None and info.state == "asking"
    held = second.runtime.manager.registry.by_id(sid)
    assert held is not None and held.session.question == "which colour?"
    assert second.runtime.manager.answer(sid, "blue")
    await held.session.wait_background()
    assert held.session.collect() == ["painted blue"]
    assert SIDE_EFFECTS == ["blue"]
    answered = worker.calls[0].messages[-1]
    assert isinstance(answered, ToolResultMessage) and answered.content == "blue"
    assert history_problems(held.session.messages) == []
    await second.conversation.close()  # the parent ends: the session consolidates, once
    assert second.consolidations() == [sid]
    assert await second.journal.load_tree("default", "conv-c1") == []


async def test_a_session_recorded_closing_finishes_its_close_once(tmp_path: Path) -> None:
    process = Process(tmp_path, ScriptedModel(), ScriptedModel(name="scripted:worker"))
    main = SessionRecord("conv-c1", "conv-c1", None, "main", "main")
    child = SessionRecord(
        "conv-c1/worker", "conv-c1", "conv-c1", "interactive", "worker", state="closing"
    )
    await process.journal.record("default", main, [])
    talk = [UserMessage("hi"), AssistantMessage("hello")]
    await process.journal.record("default", child, talk)
    restored = await restore_conversation(process.conversation, process.journal, "default", None)
    (closing,) = restored.revived.closing
    await closing.close()
    assert process.consolidations() == ["conv-c1/worker"]
    assert await process.journal.load("default", "conv-c1/worker") is None
    assert process.runtime.manager.session("conv-c1/worker") is None


async def test_a_record_whose_role_is_gone_is_dropped_and_forgotten(tmp_path: Path) -> None:
    process = Process(tmp_path, ScriptedModel(), ScriptedModel(name="scripted:worker"))
    gone = SessionRecord("conv-c1/ghost", "conv-c1", "conv-c1", "interactive", "ghost")
    await process.journal.record("default", gone, [UserMessage("boo")])
    restored = await restore_conversation(process.conversation, process.journal, "default", None)
    assert len(restored.revived.dropped) == 1 and "ghost" in restored.revived.dropped[0]
    assert await process.journal.load("default", "conv-c1/ghost") is None


async def test_without_a_recorder_a_step_records_nothing(tmp_path: Path) -> None:
    process = Process(tmp_path, ScriptedModel([call_tool("Bump", {"label": "x"}), "done"]),
                      ScriptedModel(name="scripted:worker"))  # fmt: skip
    assert not process.conversation.session.records
    await process.conversation.send("go")
    assert await process.journal.records("default") == []


def test_a_parked_question_is_answered_by_the_next_message() -> None:
    call = ToolCall("c1", "AskParent", '{"question": "why?"}')
    messages: list[Message] = [UserMessage("go"), AssistantMessage("", (call,))]
    parked, again = settle_calls(messages, ToolRegistry([]), asking="why?")
    assert parked is not None and parked.question == Question(call, "why?")
    assert not again and len(messages) == 2
    other: list[Message] = [UserMessage("go"), AssistantMessage("", (call,))]
    assert settle_calls(other, ToolRegistry([]), asking="something else") == (None, False)
    assert other[-1] == ToolResultMessage("c1", "AskParent", RESTARTED_RESULT, True)


async def test_a_one_shot_cut_short_consolidates_once_in_the_process_that_finishes_it(
    tmp_path: Path,
) -> None:
    one_shot = {"role": "worker", "task": "block"}
    first = Process(
        tmp_path,
        ScriptedModel([call_tool("SubAgent", one_shot)]),
        ScriptedModel([call_tool("Bump", {"label": "w"}), call_tool("Block")], name="s:w"),
    )
    record_conversation(first.conversation, first.journal, "default")
    turn = asyncio.create_task(first.conversation.send("go"))
    await asyncio.wait_for(BLOCKED.wait(), 30)
    await suspend_tree(first.conversation)  # the one-shot's call is cancelled on the way out
    assert turn.done() and first.consolidations() == []
    records = {r.id: r for r in await first.journal.records("default")}
    assert records["conv-c1/worker#1"].state == "running"

    worker = ScriptedModel(["worked"], name="s:w")
    second = Process(tmp_path, ScriptedModel(["the worker goes on"]), worker)
    restored = await restore_conversation(second.conversation, second.journal, "default", None)
    assert [s.id for s in restored.revived.resumed] == ["conv-c1/worker#1"]
    await tree_settled(second.conversation)
    held = second.runtime.manager.registry.by_id("conv-c1/worker#1")
    assert held is not None and held.session.collect() == ["worked"]
    assert SIDE_EFFECTS == ["w"]
    await second.conversation.close()
    assert first.consolidations() + second.consolidations() == ["conv-c1/worker#1"]
    assert await second.journal.records("default") == []


async def test_a_stored_history_cut_off_without_a_record_is_closed_as_interrupted(
    tmp_path: Path,
) -> None:
    """Durable sessions turned on after the turn that was cut off: no record says where it
    stopped, so it is closed as an interrupted turn, as without the option."""
    process = Process(tmp_path, ScriptedModel(["fine"]), ScriptedModel(name="scripted:worker"))
    cut = [UserMessage("go"), call_tool("Bump", {"label": "x"}, id="b1")]
    restored = await restore_conversation(process.conversation, process.journal, "default", cut)
    assert restored.history is None and process.conversation.session.tasks() == set()
    assert process.conversation.messages[-1].role == "assistant"
    out = await process.conversation.send("and now?")
    assert out.content == "fine" and SIDE_EFFECTS == []
    assert history_problems(process.conversation.messages) == []
