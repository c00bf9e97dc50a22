"""Start, continue and read conversations that run as Temporal workflows.

``TemporalConversations(client, tenant)`` names each conversation's workflow from the
tenant and the conversation id (two tenants never share one), starts it on first use, and
sends each message as the ``send`` Update, whose result is the turn's reply (a reply whose
``stop_reason`` is ``"asking"`` is the main agent's question: the next message answers it).
What a front end shows comes from queries (:meth:`~TemporalConversations.state`,
:meth:`~TemporalConversations.approvals`); a pending approval anywhere in the session tree
is answered with :meth:`~TemporalConversations.approve`, from any client.

A one-shot run of a role (the OpenAI-compatible ``retinue/<role>`` models) is
:meth:`~TemporalConversations.start_role_run`: a new conversation's workflow, started with
its ``run_role`` Update, holds it as its main agent's one session (a sub-agent session like
any other: its checks, approvals, sessions and consolidation the workflow's own) and closes
itself with the run's reply, so the run is consolidated once however its caller fares.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import (
    Client,
    WithStartWorkflowOperation,
    WorkflowHandle,
    WorkflowUpdateHandle,
    WorkflowUpdateStage,
)
from temporalio.common import WorkflowIDConflictPolicy

from retinue._tasks import cancel_and_wait
from retinue.errors import ConfigError, RetinueError
from retinue.messages import Message, from_dict
from retinue.policy.approvals import ApprovalRequest
from retinue.saved import valid_conversation_id
from retinue.subagents.roles import valid_name
from retinue.temporal._calls import over_payload
from retinue.temporal._role_run import RoleTask
from retinue.temporal._types import (
    Agent,
    ApprovalAnswer,
    ConversationStart,
    ConversationState,
    Limits,
    TurnReply,
)
from retinue.temporal.worker import DEFAULT_TASK_QUEUE
from retinue.temporal.workflow import ConversationWorkflow

__all__ = [
    "MessageTooLarge",
    "NoWorker",
    "TemporalConversations",
    "role_run_agent",
    "workflow_id",
]


class MessageTooLarge(RetinueError):
    """A message too large for one Temporal payload as the JSON it travels in; refused
    before anything is started or sent."""


class NoWorker(RetinueError):
    """No worker took a role run in the time it was given: the run's new conversation,
    which no worker had touched, was ended, and nothing ran."""


def workflow_id(tenant: str, conversation_id: str) -> str:
    """The workflow id of a tenant's conversation; both names are checked (letters, digits,
    ``_ . -``, no ``/``), so two pairs never share an id."""
    for what, name in (("tenant", tenant), ("conversation id", conversation_id)):
        if not valid_conversation_id(name):
            raise ConfigError(
                f"{what} {name[:80]!r}: use letters, digits, '_', '.', '-' (at most 64, no '/')"
            )
    return f"retinue/{tenant}/{conversation_id}"


def role_run_agent(tenant: str, conversation_id: str, role: str) -> Agent:
    """The one-shot run of ``role`` that conversation ``conversation_id`` holds (its main
    agent's first session, as a ``SubAgent`` call would have opened it: ``CID/role#1``)."""
    if not valid_name(role):
        raise ConfigError(f"role {role[:80]!r}: use letters, digits, '_', '.', '-' (at most 64)")
    root = workflow_id(tenant, conversation_id)
    agent_id = f"{conversation_id}/{role}#1"
    return Agent(agent_id, role, [[agent_id, role]], parent=root, root=root, one_shot=True)


@dataclass(slots=True)
class TemporalConversations:
    client: Client
    tenant: str = "default"
    task_queue: str = DEFAULT_TASK_QUEUE
    limits: Limits = field(default_factory=Limits)  # for conversations this starts

    async def start(self, conversation_id: str) -> WorkflowHandle[ConversationWorkflow, object]:
        """The conversation's workflow, started if it is not running."""
        start = ConversationStart(self.tenant, conversation_id, limits=self.limits)
        await self._start_workflow(workflow_id(self.tenant, conversation_id), start)
        return self.handle(conversation_id)

    async def start_role_run(
        self, conversation_id: str, role: str, task: str, *, wait_s: float | None = None
    ) -> WorkflowUpdateHandle[TurnReply]:
        """Start a one-shot run of ``role`` on ``task`` in the new conversation
        ``conversation_id``: its workflow, started with its ``run_role`` Update in one
        request (:mod:`retinue.temporal._role_run`: the run's role is checked before any
        model call, its ``initialPrompt`` comes first, and the conversation closes with
        the run's reply). Returns once a worker has accepted the Update; its result is the
        run's reply. :meth:`role_run` is the run's own workflow, to watch. With
        ``wait_s``, a run that no worker has begun within it is ended (its conversation's
        workflow, new and untouched, is terminated) and :class:`NoWorker` raised; one that
        a worker has begun is waited for."""
        self.check_message(task)
        agent = role_run_agent(self.tenant, conversation_id, role)  # (checks the names)
        start = WithStartWorkflowOperation(
            ConversationWorkflow.run, ConversationStart(self.tenant, conversation_id,
            limits=self.limits), id=agent.root, task_queue=self.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        )  # fmt: skip
        started = asyncio.ensure_future(self.client.start_update_with_start_workflow(
            ConversationWorkflow.run_role, RoleTask(role, task), start_workflow_operation=start,
            wait_for_stage=WorkflowUpdateStage.ACCEPTED,
        ))  # fmt: skip
        try:
            async with asyncio.timeout(wait_s):
                return await asyncio.shield(started)
        except TimeoutError:
            if not await _end_untouched(self.client.get_workflow_handle(agent.root)):
                return await started  # (a worker has begun it: it accepts the Update)
            await _let_go(started, start)
            raise NoWorker(
                f"no worker answered within {wait_s:g} s (is a `retinue worker --temporal`"
                " serving this tenant's task queue?)"
            ) from None
        except asyncio.CancelledError:  # (the caller went away: the run is left to a worker)
            await _let_go(started, start)
            raise

    def role_run(
        self, conversation_id: str, role: str
    ) -> WorkflowHandle[ConversationWorkflow, object]:
        """The workflow of the run :meth:`start_role_run` opens (its conversation's first
        session: ``{conversation's workflow id}/{role}#1``), once it is open."""
        agent = role_run_agent(self.tenant, conversation_id, role)
        run = f"{agent.root}/{agent.agent_id.rpartition('/')[2]}"
        return self.client.get_workflow_handle_for(ConversationWorkflow.run, run)

    async def _start_workflow(self, workflow_id: str, start: ConversationStart) -> None:
        await self.client.start_workflow(
            ConversationWorkflow.run, start, id=workflow_id, task_queue=self.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        )  # fmt: skip

    def handle(self, conversation_id: str) -> WorkflowHandle[ConversationWorkflow, object]:
        """The conversation's current run (it follows continue-as-new)."""
        return self.client.get_workflow_handle_for(
            ConversationWorkflow.run, workflow_id(self.tenant, conversation_id)
        )

    async def send(
        self, conversation_id: str, text: str, *, message_id: str | None = None
    ) -> TurnReply:
        """Run one turn of the conversation (started if need be); its reply. A message sent
        again with the same ``message_id`` (a client's retry) runs its turn once."""
        self.check_message(text)
        handle = await self.start(conversation_id)
        return await handle.execute_update(ConversationWorkflow.send, text, id=message_id)

    def check_message(self, text: str) -> None:
        """Refuse a message the workflow's validator would refuse for its size, before it is
        sent (past 4 MB, Temporal's server would refuse the request itself, with an error
        that reads like an outage): :class:`MessageTooLarge`."""
        if too_large := over_payload(text, self.limits.max_message_bytes, "the message"):
            raise MessageTooLarge(too_large)

    async def history(self, conversation_id: str) -> list[Message]:
        raw = await self.handle(conversation_id).query(ConversationWorkflow.history)
        return [from_dict(m) for m in raw]

    async def answer(
        self, conversation_id: str, text: str, *, message_id: str | None = None
    ) -> TurnReply:
        """Answer the main agent's question (the reply of the last turn whose
        ``stop_reason`` was ``"asking"``): its turn goes on, and this is its reply. The same
        as :meth:`send`, named for a front end."""
        return await self.send(conversation_id, text, message_id=message_id)

    async def state(self, conversation_id: str) -> ConversationState:
        """Busy, idle, paused (an approval or the main agent's question waits on a person)
        or closed; the pending approvals and question; the session tree."""
        return await self.handle(conversation_id).query(ConversationWorkflow.state)

    async def approvals(self, conversation_id: str) -> list[ApprovalRequest]:
        """The approval requests pending anywhere in the conversation's session tree."""
        raw = await self.handle(conversation_id).query(ConversationWorkflow.approvals)
        return [ApprovalRequest(**r) for r in raw]

    async def approve(
        self,
        conversation_id: str,
        request_id: str,
        *,
        allow: bool,
        message: str = "",
        always: bool = False,
    ) -> None:
        """Answer a pending approval request (``message``: why not, for the model); the
        call it holds runs (or is refused) and its turn goes on. ``always`` (with
        ``allow``): the request's rule allows what it matches for the rest of the
        conversation, in every session of its tree."""
        answer = ApprovalAnswer(request_id, allow, message, allow and always)
        await self.handle(conversation_id).execute_update(ConversationWorkflow.approve, answer)

    async def cancel_turn(self, conversation_id: str) -> bool:
        """Cancel the conversation's running turn: its model call or tool calls in flight,
        and the turns its sessions run for it. The turn's reply has ``stop_reason``
        ``"interrupted"``, and the conversation takes the next message. False if no turn
        was running."""
        return await self.handle(conversation_id).execute_update(ConversationWorkflow.cancel_turn)

    async def close(self, conversation_id: str) -> None:
        """End the conversation: its running turn, then every session in it (each
        consolidated once)."""
        await self.handle(conversation_id).signal(ConversationWorkflow.close)


async def _end_untouched(handle: WorkflowHandle[object, object]) -> bool:
    """Terminate a workflow no worker has taken a task of (True: nothing of it ran), or
    leave it (False). A worker that takes its first task meanwhile finds it terminated:
    that task's commands (the run's first activity) are not recorded."""
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
            return False
    await handle.terminate("no worker took the role run")
    return True


async def _let_go(
    started: asyncio.Future[Any], start: WithStartWorkflowOperation[Any, Any]
) -> None:
    """End an update-with-start request nobody waits for now, and read its outcomes (that
    of the request, and the one the SDK keeps for its workflow): an error left unread is
    logged when the garbage collector takes it."""
    if not started.done():
        await cancel_and_wait(started)
    elif not started.cancelled():
        started.exception()
    with contextlib.suppress(asyncio.CancelledError, Exception):  # (set: nothing waits)
        await start.workflow_handle()
