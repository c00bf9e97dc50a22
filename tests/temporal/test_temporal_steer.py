"""Steering on Temporal: the ``steer`` Update gives the running turn a message before its next
model call, in the in-process loop's words (``STEERING_NOTE``), and the turn's reply says so
(``STEERED_NOTE``); False when no turn runs; its size bounded as a message's. Steering a turn
that is then cancelled waits for the next turn's first model call, joined to its message.
``POST /v1/sessions/{id}/steer`` steers the conversation's turn or a sub-agent session's (409
when none runs; another tenant, or no node of the tree: 404). Against a real dev server and
in-process workers (the front end over real HTTP). A parent's ``SubAgent(steer=true)`` steers
its session's turn that another call of its step waits on (acknowledged at once), and gives
a session that is not working the task as a usual message. A session's reply to its parent
is cut to a message's size."""

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
from test_temporal_cancel_turn import lines, stuck_tool, until
from test_temporal_session_routes import ON, ok, read_result, role, stack

from retinue.config import Settings
from retinue.engine.loop import STEERING_NOTE
from retinue.engine.session import STEERED_NOTE
from retinue.llm.base import ToolSpec
from retinue.messages import AssistantMessage, Message, ToolResultMessage, UserMessage
from retinue.runtime import Runtime
from retinue.subagents.tools import steering_ack, waiting_note
from retinue.temporal._calls import cut_to_payload
from retinue.temporal._types import Limits
from retinue.temporal.client import TemporalConversations
from retinue.temporal.worker import make_worker
from retinue.temporal.workflow import ConversationWorkflow
from retinue.testing import ScriptedModel, call_tool, call_tools
from retinue.tools.base import Tool, tool

pytestmark = pytest.mark.timeout(180)  # a hang bound, the dev server's start included

# small bounds, so that the refusals are cheap to reach
SMALL = Limits(heartbeat_s=1.5, max_message_chars=3_000, max_payload_bytes=8_000)


def wait_for_tool(log: Path) -> Tool:
    """``wait_for(path)`` writes ``waiting``, then waits until ``path`` exists."""

    @tool
    async def wait_for(path: str) -> str:
        """Wait for a file."""
        with log.open("a") as f:
            f.write("waiting\n")
        await until(Path(path).exists)
        return "went"

    return wait_for


def runtime_for(tmp_path: Path, model: ScriptedModel, **more: object) -> Runtime:
    """A runtime of ``model`` with ``stuck`` and ``wait_for`` (their log: ``log.txt``)."""
    log = tmp_path / "log.txt"
    settings = Settings(home=tmp_path / "home", workspace=tmp_path)
    return Runtime.create(
        settings, model=model, extra_tools=[stuck_tool(log), wait_for_tool(log)],
        with_memory=False, builtins=False, **more,  # type: ignore[arg-type]
    )  # fmt: skip


def saw(messages: Sequence[Message], _tools: Sequence[ToolSpec]) -> str:
    """The answer: the last user message the model was sent."""
    last = [m for m in messages if isinstance(m, UserMessage)][-1]
    return f"saw: {last.content}"


def note(*texts: str) -> str:
    return STEERING_NOTE.format(text="\n\n".join(texts))


def steered(n: int) -> str:
    return "\n\n" + STEERED_NOTE.format(n=n)


async def refusal(update: object) -> str:
    """Why the workflow's validator refused an Update (it must)."""
    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await update  # type: ignore[misc]
    return str(getattr(refused.value.cause, "message", refused.value.cause))


async def test_steering_reaches_the_running_turn_before_its_next_model_call(
    temporal_address: str, tmp_path: Path
) -> None:
    log = tmp_path / "log.txt"
    model = ScriptedModel([call_tool("stuck", {}), saw])
    client = await Client.connect(temporal_address)
    limits = replace(SMALL, max_events=20)  # (the first turn's run continues as new after it)
    convs = TemporalConversations(client, task_queue=f"test-{uuid.uuid4().hex}", limits=limits)
    long = "z" * 2_900
    async with make_worker(client, runtime_for(tmp_path, model), convs.task_queue):
        handle = await convs.start("steer")
        first_run = (await handle.describe()).run_id
        idle = await handle.execute_update(ConversationWorkflow.steer, "too early")
        turn = asyncio.create_task(convs.send("steer", "start"))
        await until(lambda: "started" in lines(log))  # the turn's tool call runs
        taken = [await handle.execute_update(ConversationWorkflow.steer, t)
                 for t in ("turn left", long)]  # fmt: skip
        refused = [
            await refusal(handle.execute_update(ConversationWorkflow.steer, text))
            for text in ("  ", "x" * 3_001, "w" * 1_200)  # empty, too long, too much waits
        ]
        assert await convs.cancel_turn("steer") is True  # (stuck: it ends the turn)
        interrupted = await turn

        async def continued() -> bool:
            return (await handle.describe()).run_id != first_run

        await until(continued)  # (what waits is carried to the new run)
        reply = await convs.send("steer", "go on")
        history = await convs.history("steer")
    assert idle is False  # no turn ran: nothing kept
    assert taken == [True, True]
    assert refused[0] == "the steering message is empty"
    assert refused[1] == "the steering message is over 3000 chars"
    assert refused[2].startswith("the steering waiting for the turn's next step would be 4,115")
    assert interrupted.stop_reason == "interrupted"
    # the cancelled turn made no model call after it: the next turn's first one (in the run
    # that continued as new) shows it, joined to its message (one user message, as
    # in-process)
    assert reply.content == f"saw: go on\n\n{note('turn left', long)}{steered(2)}"
    users = [m.content for m in history if isinstance(m, UserMessage)]
    assert users == ["start", f"go on\n\n{note('turn left', long)}"]
    model.assert_done()


async def test_a_turn_shows_steering_after_its_tool_call(
    temporal_address: str, tmp_path: Path
) -> None:
    log = tmp_path / "log.txt"
    go = tmp_path / "go"
    model = ScriptedModel([call_tool("wait_for", {"path": str(go)}), saw])
    client = await Client.connect(temporal_address)
    convs = TemporalConversations(client, task_queue=f"test-{uuid.uuid4().hex}", limits=SMALL)
    async with make_worker(client, runtime_for(tmp_path, model), convs.task_queue):
        handle = await convs.start("after-call")
        turn = asyncio.create_task(convs.send("after-call", "start"))
        await until(lambda: "waiting" in lines(log))
        taken = await handle.execute_update(ConversationWorkflow.steer, "mind the gap")
        go.touch()
        reply = await turn
        history = await convs.history("after-call")
    assert taken is True
    assert reply.content == f"saw: {note('mind the gap')}{steered(1)}"
    said = [(m.role, m.content) for m in history]
    assert said[2:] == [("tool", "went"), ("user", note("mind the gap")),
                        ("assistant", f"saw: {note('mind the gap')}")]  # fmt: skip
    model.assert_done()


async def test_the_front_end_steers_a_conversation_s_turn_and_a_session_s(
    temporal_address: str, tmp_path: Path
) -> None:
    log = tmp_path / "log.txt"
    cid = f"steer-{uuid.uuid4().hex[:8]}"
    sid = f"conv-{cid}/helper"
    main = ScriptedModel([call_tool("SubAgent", {"role": "helper", "task": "wait", **ON}), saw,
                          call_tool("SubAgent", {"role": "helper", "task": "again", **ON}),
                          read_result])  # fmt: skip
    helper = ScriptedModel([call_tool("stuck", {}), saw])
    async with stack(temporal_address, tmp_path, main, {"scripted:helper": helper},
                     [role("helper")]) as (http, other, _front):  # fmt: skip
        turn = asyncio.create_task(
            http.post(f"/v1/conversations/{cid}/messages", json={"content": "ask the helper"})
        )
        await until(lambda: "started" in lines(log))  # the session's long call runs
        to_session = ok(await http.post(f"/v1/sessions/{sid}/steer", json={"content": "hurry"}))
        to_main = ok(await http.post(f"/v1/sessions/conv-{cid}/steer", json={"content": "sum up"}))
        refused = [
            await other.post(f"/v1/sessions/{sid}/steer", json={"content": "x"}),
            await other.post(f"/v1/sessions/conv-{cid}/steer", json={"content": "x"}),
            await http.post(f"/v1/sessions/conv-{cid}/nobody/steer", json={"content": "x"}),
            await http.post("/v1/sessions/conv-nothing-here/steer", json={"content": "x"}),
            await http.post(f"/v1/sessions/{sid}/steer", json={"content": "   "}),
            await http.post(f"/v1/sessions/{sid}/steer", json={"content": ""}),
            await http.post(f"/v1/sessions/{sid}/steer", json={"content": "x" * 1_000_001}),
            await http.post(f"/v1/sessions/{sid}/steer"),  # (no body)
        ]
        ok(await http.post(f"/v1/sessions/{sid}/interrupt"))  # (stuck: it ends that turn)
        reply = ok(await turn)
        idle = [await http.post(f"/v1/sessions/{s}/steer", json={"content": "late"})
                for s in (sid, f"conv-{cid}")]  # fmt: skip
        second = ok(await http.post(f"/v1/conversations/{cid}/messages",
                                    json={"content": "ask again"}))  # fmt: skip
    assert to_session == {"id": sid, "steered": True}
    assert to_main == {"id": f"conv-{cid}", "steered": True}
    assert [r.status_code for r in refused] == [404, 404, 404, 404, 400, 422, 413, 422]
    assert "the steering message is empty" in refused[4].json()["error"]
    # the main turn read the session's interrupted reply, then its steering, and answered
    assert reply["content"] == f"saw: {note('sum up')}{steered(1)}"
    assert [r.status_code for r in idle] == [409, 409]
    assert idle[0].json()["error"] == f"session {sid!r} has no running turn to steer"
    # the session's turn was cancelled before its next model call: its next turn shows it
    assert second["content"].startswith(f"read: saw: again\n\n{note('hurry')}{steered(1)}")
    main.assert_done()
    helper.assert_done()


def saw_turn(messages: Sequence[Message], _tools: Sequence[ToolSpec]) -> str:
    """The answer: the user messages of this turn (since the last answer), as one text:
    the same whether steering was joined to the turn's message or came after a step."""
    answers = [i for i, m in enumerate(messages) if isinstance(m, AssistantMessage)
               and not m.tool_calls]  # fmt: skip
    since = messages[answers[-1] + 1 :] if answers else messages
    return "saw: " + "\n\n".join(m.content for m in since if isinstance(m, UserMessage))


def results(messages: Sequence[Message], _tools: Sequence[ToolSpec]) -> str:
    """The answer: the results of the last step's calls, in their order."""
    ended = [i for i, m in enumerate(messages) if not isinstance(m, ToolResultMessage)][-1]
    return "\n---\n".join(m.content for m in messages[ended + 1 :])


async def test_a_parent_steers_its_session_s_running_turn(
    temporal_address: str, tmp_path: Path
) -> None:
    log = tmp_path / "log.txt"
    go = tmp_path / "go"
    helper_id = "steer-sub/helper"
    main = ScriptedModel([
        call_tool("SubAgent", {"role": "helper", "task": "hello", **ON}), "opened",
        call_tools(("SubAgent", {"role": "helper", "task": "work", **ON}),
                   ("SubAgent", {"role": "helper", "task": "focus on X", "steer": True})),
        results,
        call_tool("SubAgent", {"role": "helper", "task": "are you there", "steer": True}),
        read_result,
    ])  # fmt: skip
    helper = ScriptedModel(["hi", call_tool("wait_for", {"path": str(go)}), saw_turn, saw_turn])
    runtime = runtime_for(tmp_path, main, roles=[role("helper")], model_for=lambda _s: helper)
    client = await Client.connect(temporal_address)
    convs = TemporalConversations(client, task_queue=f"test-{uuid.uuid4().hex}", limits=SMALL)

    async def steered_by_parent() -> bool:  # (the signal is in its workflow's history)
        sessions = (await convs.state("steer-sub")).sessions
        history = await client.get_workflow_handle(sessions[0].workflow_id).fetch_history()
        return any(e.workflow_execution_signaled_event_attributes.signal_name == "parent_steers"
                   for e in history.events)  # fmt: skip

    async with make_worker(client, runtime, convs.task_queue):
        await convs.send("steer-sub", "open a helper")
        turn = asyncio.create_task(convs.send("steer-sub", "work, and steer"))
        await until(lambda: "waiting" in lines(log))  # the session's turn runs its call
        await until(steered_by_parent)
        go.touch()
        both = await turn
        usual = await convs.send("steer-sub", "steer an idle one")
    # (the steering came before its first model call, or while its call ran: either way)
    worked = f"saw: work\n\n{note('focus on X')}{steered(1)}"
    assert both.content.split("\n---\n") == [
        waiting_note(worked, helper_id, "helper", None),
        steering_ack(helper_id, "helper", None, answered=False),
    ]
    # not working: the task went as a usual message, and its reply came back
    assert usual.content == "read: " + waiting_note("saw: are you there", helper_id, "helper", None)
    main.assert_done()
    helper.assert_done()


@pytest.mark.parametrize("text", ["short", "a" * 5_000, "é" * 2_000, "😀" * 900 + "end"])
def test_a_reply_is_cut_to_fit_a_message(text: str) -> None:
    cut = cut_to_payload(text, 3_000, 4_000, "the session's reply")
    if text == "short":
        assert cut == text
        return
    head, _, note = cut.rpartition("\n\n")
    assert text.startswith(head) and len(head) > 100  # (as much as fits, about)
    assert note.startswith("[the session's reply was cut: ")
    assert len(cut) <= 3_000 and len(json.dumps(cut)) <= 4_000


async def test_a_session_s_reply_reaches_its_parent_cut_to_a_message(
    temporal_address: str, tmp_path: Path
) -> None:
    main = ScriptedModel([call_tool("SubAgent", {"role": "helper", "task": "talk", **ON}),
                          read_result])  # fmt: skip
    helper = ScriptedModel(["é" * 2_000])  # 12,002 bytes as JSON: over SMALL's 4,000
    runtime = runtime_for(tmp_path, main, roles=[role("helper")], model_for=lambda _s: helper)
    client = await Client.connect(temporal_address)
    convs = TemporalConversations(client, task_queue=f"test-{uuid.uuid4().hex}", limits=SMALL)
    async with make_worker(client, runtime, convs.task_queue):
        reply = await convs.send("long-reply", "ask the helper")
    assert reply.content.startswith("read: éé")
    assert "[the session's reply was cut: 2,000 chars, 12,002 bytes as JSON]" in reply.content
    assert reply.content.count("é") < 700  # (what fits 4,000 bytes: 6 each)
    main.assert_done()
    helper.assert_done()


async def test_steering_that_comes_during_the_answer_s_model_call_is_answered_too(
    temporal_address: str, tmp_path: Path
) -> None:
    # the first try of the model call hangs until its timeout (its step is taken then); the
    # steering comes meanwhile; the second try answers, and the model answers once more
    model = ScriptedModel(["never read: its try timed out", "first answer", saw], delay=3600.0)
    client = await Client.connect(temporal_address)
    limits = Limits(heartbeat_s=1.5, model_timeout_s=3.0)
    convs = TemporalConversations(client, task_queue=f"test-{uuid.uuid4().hex}", limits=limits)
    async with make_worker(client, runtime_for(tmp_path, model), convs.task_queue):
        handle = await convs.start("during")
        turn = asyncio.create_task(convs.send("during", "start"))
        await until(lambda: model.call_count == 1)  # (its activity runs: after the step)
        taken = await handle.execute_update(ConversationWorkflow.steer, "one more thing")
        model.delay = 0.0
        reply = await turn
        history = await convs.history("during")
    assert taken is True
    assert reply.content == f"saw: {note('one more thing')}{steered(1)}"
    said = [(m.role, m.content) for m in history]
    assert said == [("user", "start"), ("assistant", "first answer"),
                    ("user", note("one more thing")),
                    ("assistant", f"saw: {note('one more thing')}")]  # fmt: skip
    model.assert_done()
