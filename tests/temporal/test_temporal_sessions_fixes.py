"""A parent's sessions on Temporal at their edges: a one-shot run's close that reaches the
parent with its reply, a turn cancelled while a session's workflow starts, a role's
``initialPrompt``, and the loop detectors' ``Limits.repeat_limit``. Against a real dev
server and in-process workers, with scripted models."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("temporalio", reason="the temporal extra (temporalio) is not installed")

from temporalio import client as temporal_client
from temporalio import workflow
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.worker import (
    Interceptor,
    StartChildWorkflowInput,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
    WorkflowOutboundInterceptor,
)
from test_temporal_tree import (
    FAST,
    approvals_of,
    closed,
    conversations,
    delegate,
    deploy,
    heard,
    last_result,
    role,
    runtime_for,
)

from retinue.config import Settings
from retinue.runtime import Runtime
from retinue.server.temporal_front.front import TemporalFront, TemporalUnavailable
from retinue.temporal._types import Closed, Delivery, Reply
from retinue.temporal.client import TemporalConversations
from retinue.temporal.worker import make_worker
from retinue.testing import ScriptedModel, call_tool
from retinue.tools.base import tool

pytestmark = pytest.mark.timeout(300)  # a hang bound, the dev server's start included


async def delivered(convs: TemporalConversations, session: WorkflowHandle[Any, Any]) -> Delivery:
    """The message a session's workflow was sent (its ``deliver`` signal, from its history)."""
    history = await session.fetch_history()
    for event in history.events:
        signalled = event.workflow_execution_signaled_event_attributes
        if signalled.signal_name == "deliver":
            [found] = await convs.client.data_converter.decode(signalled.input.payloads, [Delivery])
            return found
    raise AssertionError("the session was sent no message")


async def test_a_one_shot_run_s_close_that_comes_with_its_reply_does_not_hold_the_close(
    temporal_address: str, tmp_path: Path
) -> None:
    """The run's ``child_closed`` handled in the same workflow task as its reply (signals
    are handled before the waiting code wakes): the parent's close still ends. The worker
    stops while the run waits on an approval; the run's reply and its close are then
    signalled to the parent as the run signals them, so the next worker gets both in one
    workflow task."""
    convs = await conversations(temporal_address)
    main = ScriptedModel([delegate("a", "go"), last_result])
    a = ScriptedModel([call_tool("deploy", {"target": "prod"})])
    runtime, _ = runtime_for(tmp_path, main, {"scripted:a": a}, roles=[role("a")],
                             tools=[deploy])  # fmt: skip
    parent = convs.handle("early")
    async with make_worker(convs.client, runtime, convs.task_queue):
        await convs.start("early")
        turn = asyncio.create_task(convs.send("early", "deploy it"))
        await approvals_of(convs, "early")
    session = convs.client.get_workflow_handle(f"{parent.id}/a#1")
    token = (await delivered(convs, session)).token
    await parent.signal("reply", Reply(token, "deployed", "final"))
    await parent.signal("child_closed", Closed("early/a#1", "none", 1, True))
    await session.terminate()  # (it still waits on its approval; its signals were sent)
    async with make_worker(convs.client, runtime, convs.task_queue):
        reply = await turn
        async with asyncio.timeout(60):  # a hang bound: the close waited forever
            await closed(convs, "early")
    assert reply.content == "got: deployed"
    main.assert_done()


class CancelsTheTurnAtStart(temporal_client.Interceptor, Interceptor):
    """Cancels the running turn (``cancel_turn``) the moment the parent's workflow asks
    for the start of a session whose workflow id ends with ``suffix``: the start is then
    pending, as it is when a person cancels between the start's command and its answer."""

    def __init__(self, suffix: str) -> None:
        self.suffix = suffix

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor]:
        suffix = self.suffix

        class Outbound(WorkflowOutboundInterceptor):
            async def start_child_workflow(self, input: StartChildWorkflowInput) -> Any:
                if input.id.endswith(suffix):
                    cancel = asyncio.create_task(workflow.instance().cancel_turn())
                    CANCELS.append(cancel)
                return await super().start_child_workflow(input)

        class Inbound(WorkflowInboundInterceptor):
            def init(self, outbound: WorkflowOutboundInterceptor) -> None:
                super().init(Outbound(outbound))

        return Inbound


CANCELS: list[asyncio.Task[Any]] = []  # (the interceptor's tasks, held)


async def test_a_turn_cancelled_while_its_session_starts_leaves_no_session_behind(
    temporal_address: str, tmp_path: Path
) -> None:
    """The one-shot run whose start was pending is closed (not cancelled, not left open),
    and the caps count it no longer: with one session open at most, the next turn opens
    another."""
    client = await Client.connect(temporal_address, interceptors=[CancelsTheTurnAtStart("/a#1")])
    convs = replace(await conversations(temporal_address), client=client)
    main = ScriptedModel([delegate("a", "go"), delegate("a", "again"), last_result])
    a = ScriptedModel(["again done"])
    settings = Settings(home=tmp_path / "home", workspace=tmp_path, max_concurrent_subagents=1)
    runtime = Runtime.create(settings, model=main, model_for={"scripted:a": a}.__getitem__,
                             roles=[role("a")], with_memory=False, builtins=False)  # fmt: skip
    async with make_worker(convs.client, runtime, convs.task_queue):
        cancelled = await convs.send("cut", "go")
        first = client.get_workflow_handle(f"{convs.handle('cut').id}/a#1")
        async with asyncio.timeout(60):  # a hang bound: a session that never closes
            await first.result()
        status = (await first.describe()).status
        between = await convs.state("cut")
        second = await convs.send("cut", "again")
        await closed(convs, "cut")
    assert cancelled.stop_reason == "interrupted"
    assert status == WorkflowExecutionStatus.COMPLETED  # closed, not cancelled
    assert between.sessions == []
    assert second.content == "got: again done"
    main.assert_done()
    a.assert_done()


async def test_a_role_s_initial_prompt_comes_before_its_session_s_first_task_only(
    temporal_address: str, tmp_path: Path
) -> None:
    on = {"interactive": True}
    main = ScriptedModel([delegate("helper", "t1", **on), last_result,
                          delegate("helper", "t2", **on), last_result])  # fmt: skip
    helper = ScriptedModel([heard, heard])
    briefed = replace(role("helper"), initial_prompt="Be brief.")
    runtime, _ = runtime_for(tmp_path, main, {"scripted:helper": helper}, roles=[briefed])
    convs = await conversations(temporal_address)
    async with make_worker(convs.client, runtime, convs.task_queue):
        first = await convs.send("brief", "one")
        second = await convs.send("brief", "two")
        await closed(convs, "brief")
    assert first.content == "got: heard: Be brief.\n\nt1"
    assert second.content == "got: heard: Be brief.\n\nt1 | t2"


def looking(runs: list[str]) -> Any:
    @tool
    async def look(path: str) -> str:
        """Look at a file."""
        runs.append(path)
        return "nothing new"

    return look


async def test_the_loop_detectors_take_the_limit_the_client_sets(
    temporal_address: str, tmp_path: Path
) -> None:
    runs: list[str] = []
    again = call_tool("look", {"path": "a.txt"})
    main = ScriptedModel([again, again, again, "unreached"])
    runtime, _ = runtime_for(tmp_path, main, {}, roles=[], tools=[looking(runs)])
    convs = await conversations(temporal_address)
    convs.limits = replace(FAST, repeat_limit=2)
    async with make_worker(convs.client, runtime, convs.task_queue):
        reply = await convs.send("twice", "look at a.txt")
    assert reply.stop_reason == "repeated_call"
    assert runs == ["a.txt"] * 2  # the third was not run (3 by default)


async def test_no_repeat_limit_turns_the_loop_detectors_off(
    temporal_address: str, tmp_path: Path
) -> None:
    runs: list[str] = []
    again = call_tool("look", {"path": "a.txt"})
    main = ScriptedModel([again, again, again, again, "done"])
    runtime, _ = runtime_for(tmp_path, main, {}, roles=[], tools=[looking(runs)])
    convs = await conversations(temporal_address)
    convs.limits = replace(FAST, repeat_limit=None)
    async with make_worker(convs.client, runtime, convs.task_queue):
        reply = await convs.send("unwatched", "look at a.txt")
    assert (reply.stop_reason, reply.content) == ("final", "done")
    assert runs == ["a.txt"] * 4


async def test_a_role_run_no_worker_takes_gives_up_and_leaves_nothing_to_run(
    temporal_address: str,
) -> None:
    """As a message does, a ``retinue/<role>`` run waits ``wait_for_worker_s`` for a worker,
    then is 503; its new conversation, which no worker touched, is ended (a worker that
    comes later finds nothing to run)."""
    client = await Client.connect(temporal_address)
    front = TemporalFront(client, task_queue=f"test-{uuid.uuid4().hex}", wait_for_worker_s=1.0)
    cid = f"idle-{uuid.uuid4().hex[:8]}"
    with pytest.raises(TemporalUnavailable, match="no worker answered within 1 s"):
        async with asyncio.timeout(60):  # a hang bound: it waited as long as none came
            await front.start("default", cid, "go", role="helper")
    ended = await client.get_workflow_handle(f"retinue/default/{cid}").describe()
    assert ended.status == WorkflowExecutionStatus.TERMINATED
