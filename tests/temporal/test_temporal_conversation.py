"""Conversations as Temporal workflows, against a real dev server and in-process workers."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("temporalio", reason="the temporal extra (temporalio) is not installed")

from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.worker import Worker

from retinue.config import Settings
from retinue.durable.revive import RESTARTED_RESULT
from retinue.engine.compress import AutoCompressor, is_summary
from retinue.errors import ModelError
from retinue.llm.base import ToolSpec
from retinue.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolResultMessage,
    UserMessage,
)
from retinue.runtime import Runtime
from retinue.temporal._types import Limits
from retinue.temporal.client import MessageTooLarge, TemporalConversations
from retinue.temporal.worker import make_worker
from retinue.temporal.workflow import ConversationWorkflow
from retinue.testing import ScriptedModel, call_tool, call_tools
from retinue.tools.base import Tool, tool

pytestmark = pytest.mark.timeout(300)  # a hang bound, the dev server's start included

FAST = Limits(heartbeat_s=2.0)


def side_effects(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def note_tool(path: Path, *, hang: asyncio.Event | None = None) -> Tool:
    """A tool with a side effect (a line in ``path``); with ``hang``, it then waits for it."""

    @tool
    async def note(text: str) -> str:
        """Write a note."""
        with path.open("a") as f:
            f.write(text + "\n")
        if hang is not None:
            await hang.wait()
        return f"noted {text}"

    return note


def runtime_for(tmp_path: Path, model: ScriptedModel, tools: list[Tool]) -> Runtime:
    settings = Settings(home=tmp_path / "home", workspace=tmp_path)
    return Runtime.create(
        settings, model=model, model_for=lambda _s: model, extra_tools=tools,
        with_memory=False, builtins=False,
    )  # fmt: skip


async def conversations(address: str) -> tuple[TemporalConversations, Client]:
    client = await Client.connect(address)
    queue = f"test-{uuid.uuid4().hex}"  # every test its own workers
    return TemporalConversations(client, task_queue=queue, limits=FAST), client


async def test_two_turns_with_a_tool_call_keep_the_history(
    temporal_address: str, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    model = ScriptedModel([call_tool("note", {"text": "milk"}), "Noted: milk.", "You said milk."])
    convs, client = await conversations(temporal_address)
    worker = make_worker(client, runtime_for(tmp_path, model, [note_tool(notes)]), convs.task_queue)
    async with worker:
        first = await convs.send("c1", "remember milk")
        second = await convs.send("c1", "what did I say?")
        history = await convs.history("c1")
    assert (first.content, first.stop_reason) == ("Noted: milk.", "final")
    assert second.content == "You said milk."
    assert side_effects(notes) == ["milk"]
    kinds = [type(m).__name__ for m in history]
    assert kinds == ["UserMessage", "AssistantMessage", "ToolResultMessage", "AssistantMessage",
                     "UserMessage", "AssistantMessage"]  # fmt: skip
    result = history[2]
    assert isinstance(result, ToolResultMessage) and result.content == "noted milk"
    # the model saw the system prompt first, then the whole history, the tool's result included
    last = model.calls[-1].messages
    assert isinstance(last[0], SystemMessage)
    assert [m.content for m in last[1:] if isinstance(m, UserMessage)] == [
        "remember milk",
        "what did I say?",
    ]
    assert "note" in model.calls[0].tool_names
    model.assert_done()


def cut_short(messages: Sequence[Message], _tools: Sequence[ToolSpec]) -> str:
    result = messages[-1]
    assert isinstance(result, ToolResultMessage) and result.content == RESTARTED_RESULT
    return "The note may not have been written."


async def test_a_worker_stopped_mid_call_does_not_run_the_call_twice(
    temporal_address: str, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    convs, client = await conversations(temporal_address)
    hang = asyncio.Event()  # never set: the first worker stops while its call runs
    first_model = ScriptedModel([call_tool("note", {"text": "pay"})])
    first = make_worker(
        client, runtime_for(tmp_path, first_model, [note_tool(notes, hang=hang)]), convs.task_queue
    )
    running = asyncio.create_task(first.run())
    turn = asyncio.create_task(convs.send("c2", "pay the bill"))
    while not side_effects(notes):
        await asyncio.sleep(0.05)
    await first.shutdown()  # (its call is cancelled: the worker is gone, mid-turn)
    await asyncio.gather(running, return_exceptions=True)
    assert not turn.done()
    second_model = ScriptedModel([cut_short])
    second = make_worker(
        client, runtime_for(tmp_path, second_model, [note_tool(notes)]), convs.task_queue
    )
    async with second:
        reply = await turn
        history = await convs.history("c2")
    assert reply.content == "The note may not have been written."
    assert side_effects(notes) == ["pay"]  # once, not twice
    results = [m for m in history if isinstance(m, ToolResultMessage)]
    assert [(r.content, r.is_error) for r in results] == [(RESTARTED_RESULT, True)]
    second_model.assert_done()


async def test_an_idempotent_call_runs_again_on_the_next_worker(
    temporal_address: str, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    convs, client = await conversations(temporal_address)
    hang = asyncio.Event()
    first = make_worker(
        client,
        runtime_for(tmp_path, ScriptedModel([call_tool("note", {"text": "look"})]),
                    [replace(note_tool(notes, hang=hang), idempotent=True)]),
        convs.task_queue,
    )  # fmt: skip
    running = asyncio.create_task(first.run())
    turn = asyncio.create_task(convs.send("c3", "look"))
    while not side_effects(notes):
        await asyncio.sleep(0.05)
    await first.shutdown()
    await asyncio.gather(running, return_exceptions=True)
    again = replace(note_tool(notes), idempotent=True)
    second = make_worker(
        client, runtime_for(tmp_path, ScriptedModel(["Looked."]), [again]), convs.task_queue
    )
    async with second:
        assert (await turn).content == "Looked."
        history = await convs.history("c3")
    assert side_effects(notes) == ["look", "look"]  # a read runs again
    results = [m for m in history if isinstance(m, ToolResultMessage)]
    assert [r.content for r in results] == ["noted look"]


async def test_a_long_conversation_continues_as_new_with_its_history(
    temporal_address: str, tmp_path: Path
) -> None:
    model = ScriptedModel(["one", "two", "three"])
    client = await Client.connect(temporal_address)
    convs = TemporalConversations(
        client, task_queue=f"test-{uuid.uuid4().hex}", limits=replace(FAST, max_events=12)
    )
    worker: Worker = make_worker(client, runtime_for(tmp_path, model, []), convs.task_queue)
    async with worker:
        runs = set()
        for text in ("a", "b", "c"):
            await convs.send("c4", text)
            runs.add((await convs.handle("c4").describe()).run_id)
        history = await convs.history("c4")
    assert len(runs) >= 2  # it continued as new
    said = [(m.role, m.content) for m in history]
    assert said == [("user", "a"), ("assistant", "one"), ("user", "b"), ("assistant", "two"),
                    ("user", "c"), ("assistant", "three")]  # fmt: skip
    assert all(isinstance(m, UserMessage | AssistantMessage) for m in history)


async def test_two_tenants_keep_apart_and_a_worker_serves_only_its_own(
    temporal_address: str, tmp_path: Path
) -> None:
    client = await Client.connect(temporal_address)
    queue = f"test-{uuid.uuid4().hex}"
    model = ScriptedModel(["Hello, a."])
    settings = Settings(home=tmp_path / "home", workspace=tmp_path, tenant="a")
    runtime = Runtime.create(settings, model=model, model_for=lambda _s: model,
                             with_memory=False, builtins=False)  # fmt: skip
    a = TemporalConversations(client, tenant="a", task_queue=queue, limits=FAST)
    b = TemporalConversations(client, tenant="b", task_queue=queue, limits=FAST)
    b.limits = replace(FAST, model_attempts=1)
    async with make_worker(client, runtime, queue):
        assert (await a.send("same", "hi")).content == "Hello, a."
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await b.send("same", "hi")
        history_a, history_b = await a.history("same"), await b.history("same")
    assert "serves tenant 'a', not 'b'" in str(refused.value.cause)
    assert [m.content for m in history_a] == ["hi", "Hello, a."]
    assert history_b[0].content == "hi"  # its own workflow; its turn failed, closed:
    assert history_b[1].content.startswith("Stopped: ") and len(history_b) == 2
    model.assert_done()


async def test_an_empty_or_oversized_message_is_refused_before_it_enters_the_history(
    temporal_address: str, tmp_path: Path
) -> None:
    convs, client = await conversations(temporal_address)
    convs.limits = replace(FAST, max_message_chars=10)
    model = ScriptedModel([])
    async with make_worker(client, runtime_for(tmp_path, model, []), convs.task_queue):
        for text in ("   ", "x" * 11):
            with pytest.raises(WorkflowUpdateFailedError):
                await convs.send("c5", text)
        assert await convs.history("c5") == []
    assert model.call_count == 0


async def test_a_message_too_large_as_json_is_refused_and_the_conversation_goes_on(
    temporal_address: str, tmp_path: Path
) -> None:
    """Under the character limit but over one payload once JSON-escaped ("é" is 6 bytes):
    refused before it enters the history (accepted, it would fail every workflow task)."""
    convs, client = await conversations(temporal_address)
    convs.limits = replace(FAST, max_payload_bytes=60_000)  # (a message: 30,000 bytes)
    model = ScriptedModel(["first.", "next."])
    async with make_worker(client, runtime_for(tmp_path, model, []), convs.task_queue):
        assert (await convs.send("c5b", "hello")).content == "first."
        big = "\u00e9" * 6_000  # 6,000 chars, 36,002 bytes as JSON
        with pytest.raises(MessageTooLarge, match="36,002 bytes as JSON, over the 30,000"):
            await convs.send("c5b", big)  # (the client's own check: nothing is sent)
        with pytest.raises(WorkflowUpdateFailedError) as refused:  # (the workflow's)
            await convs.handle("c5b").execute_update(ConversationWorkflow.send, big)
        assert "36,002 bytes as JSON, over the 30,000" in str(refused.value.cause)
        assert (await convs.send("c5b", "again")).content == "next."
        history = await convs.history("c5b")
    assert [m.content for m in history] == ["hello", "first.", "again", "next."]


async def test_a_failed_model_call_ends_the_turn_and_the_next_turn_goes_on(
    temporal_address: str, tmp_path: Path
) -> None:
    convs, client = await conversations(temporal_address)
    convs.limits = replace(FAST, model_attempts=1)
    model = ScriptedModel([ModelError("the provider is down"), "Back."])
    async with make_worker(client, runtime_for(tmp_path, model, []), convs.task_queue):
        with pytest.raises(WorkflowUpdateFailedError):
            await convs.send("c6", "hello?")
        assert (await convs.send("c6", "again")).content == "Back."
        history = await convs.history("c6")
    said = [(m.role, m.content.split(":")[0]) for m in history]
    assert said == [("user", "hello?"), ("assistant", "Stopped"), ("user", "again"),
                    ("assistant", "Back.")]  # fmt: skip


async def test_a_message_sent_twice_with_one_id_runs_one_turn(
    temporal_address: str, tmp_path: Path
) -> None:
    convs, client = await conversations(temporal_address)
    model = ScriptedModel(["Once."])
    async with make_worker(client, runtime_for(tmp_path, model, []), convs.task_queue):
        first = await convs.send("c7", "hi", message_id="m-1")
        again = await convs.send("c7", "hi", message_id="m-1")  # a client's retry
        history = await convs.history("c7")
    assert first.content == again.content == "Once."
    assert [m.content for m in history] == ["hi", "Once."]
    model.assert_done()


async def test_a_history_too_large_for_a_payload_ends_the_turn_with_a_reason(
    temporal_address: str, tmp_path: Path
) -> None:
    convs, client = await conversations(temporal_address)
    convs.limits = replace(FAST, max_payload_bytes=300)
    model = ScriptedModel(["x" * 200])
    async with make_worker(client, runtime_for(tmp_path, model, []), convs.task_queue):
        await convs.send("c8", "hi")
        with pytest.raises(WorkflowUpdateFailedError) as failed:
            await convs.send("c8", "more")
        history = await convs.history("c8")
    assert "over the 300 one Temporal payload may carry" in str(failed.value.cause)
    assert [m.role for m in history] == ["user", "assistant", "user", "assistant"]
    assert history[-1].content.startswith("Stopped: the conversation's history is ")
    model.assert_done()


SUMMARY = "## Task\n- answer questions\n## Next step\n- keep going"


async def test_autocompress_shortens_the_workflow_s_history(
    temporal_address: str, tmp_path: Path
) -> None:
    convs, client = await conversations(temporal_address)
    model = ScriptedModel(["ok", SUMMARY, "final"])
    runtime = runtime_for(tmp_path, model, [])
    runtime.compressor = AutoCompressor(context_window=1_600, output_reserve=100)  # at 1,200
    async with make_worker(client, runtime, convs.task_queue):
        await convs.send("c9", "question: " + "lorem ipsum " * 600)  # ~1,500 tokens
        assert (await convs.send("c9", "and now?")).content == "final"
        history = await convs.history("c9")
    model.assert_done()
    assert is_summary(history[0]) and SUMMARY in history[0].content
    assert [(m.role, m.content) for m in history[-2:]] == [("user", "and now?"),
                                                           ("assistant", "final")]  # fmt: skip
    assert len(json.dumps([m.content for m in history])) < 2_000  # the long question is gone


def test_workflow_ids_refuse_names_that_could_collide() -> None:
    from retinue.errors import ConfigError
    from retinue.temporal.client import workflow_id

    assert workflow_id("acme", "support-42") == "retinue/acme/support-42"
    for tenant, cid in (("a", "b/c"), ("a/b", "c"), ("", "x"), ("a", "")):
        with pytest.raises(ConfigError, match="no '/'"):
            workflow_id(tenant, cid)


async def test_calls_past_the_bound_of_one_step_are_refused_unrun(
    temporal_address: str, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    convs, client = await conversations(temporal_address)
    convs.limits = replace(FAST, max_calls=1)
    two = call_tools(("note", {"text": "one"}), ("note", {"text": "two"}))
    model = ScriptedModel([two, "Done."])
    async with make_worker(client, runtime_for(tmp_path, model, [note_tool(notes)]),
                           convs.task_queue):  # fmt: skip
        await convs.send("c11", "note twice")
        history = await convs.history("c11")
    assert side_effects(notes) == ["one"]
    results = [m for m in history if isinstance(m, ToolResultMessage)]
    assert [r.is_error for r in results] == [False, True]
    assert "over the 1 calls one step may make" in results[1].content


def note_until_told(messages: Sequence[Message], _tools: Sequence[ToolSpec]) -> Message | str:
    """Calls ``note`` with a large text after each result (a new one each time: the same
    call with the same result would be stopped as a loop); answers a new user message."""
    if isinstance(messages[-1], UserMessage) and messages[-1].content == "and now?":
        return "fine"
    return call_tool("note", {"text": "n" * 2_000 + str(len(messages))})


async def test_a_turn_stops_before_its_run_s_history_outgrows_the_server_s_limit(
    temporal_address: str, tmp_path: Path
) -> None:
    # each model call of a turn adds the whole history to the run's: past the server's
    # 50 MB (here: 60 kB) the run would be terminated and the conversation lost with it
    notes = tmp_path / "notes.txt"
    convs, client = await conversations(temporal_address)
    convs.limits = replace(FAST, max_run_history_bytes=60_000, max_history_bytes=30_000)
    model = ScriptedModel([note_until_told] * 40)
    async with make_worker(client, runtime_for(tmp_path, model, [note_tool(notes)]),
                           convs.task_queue):  # fmt: skip
        with pytest.raises(WorkflowUpdateFailedError) as failed:
            await convs.send("c12", "note forever")
        assert (await convs.send("c12", "and now?")).content == "fine"
        history = await convs.history("c12")
    assert "too long" in str(failed.value.cause)
    assert 2 <= len(side_effects(notes)) < 20
    assert history[-1].content == "fine"
    assert any(m.content.startswith("Stopped: ") for m in history)


def test_a_task_or_question_too_large_as_json_is_refused_to_the_model() -> None:
    """A delegated task or a question travels as a signal's payload: past the bound the
    model reads why, and nothing is sent."""
    from retinue.temporal._calls import read_delegation, read_question

    task = call_tool("SubAgent", {"role": "helper", "task": "\u00e9" * 6_000}).tool_calls[0]
    assert read_delegation(task, 1_000_000, 30_000) == (
        "the task is 36,002 bytes as JSON, over the 30,000 one Temporal message may carry"
        " here: shorten it"
    )
    assert not isinstance(read_delegation(task, 1_000_000, 40_000), str)
    question = call_tool("AskParent", {"question": "\U0001f600" * 3_000}).tool_calls[0]
    assert "36,002 bytes as JSON" in str(read_question(question, 1_000_000, 30_000))
