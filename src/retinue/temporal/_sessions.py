"""A parent's side of its sub-agent sessions, for the conversation workflow: ``SubAgent``
opens a session's child workflow (once an activity has checked its role, and the
conversation's workflow has counted it against the sub-agent caps) or continues one, sends
it the message as a ``deliver`` signal and waits for its ``reply`` signal (with
``steer=true``, to a session whose turn runs for another call of the step: the
``parent_steers`` signal, acknowledged at once; to one that is not working: a usual message);
``UnloadSubAgent`` closes one and waits until it has closed (its own sessions first, then
its consolidation); ``SubAgentStatus`` says what the parent knows of one (busy, idle or
asking, turns answered). Interactive sessions are held under ``role[:instance]``; a
one-shot run closes itself after its reply, unless it asked a question: then it is held
like an interactive session until answered. A parent's turn cancelled while a session
answers it cancels the session's turn too (``interrupt`` signal); a session's turn
cancelled alone (its ``cancel_turn``, from a front end) ends its ``SubAgent`` call with
:func:`interrupted_note`, and the parent's turn goes on. The ``session_view``
query is what a front end lists of a session beside its node in the tree. Deterministic, as
workflow code must be.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, cast

from temporalio import workflow
from temporalio.exceptions import FailureError

with workflow.unsafe.imports_passed_through():
    from retinue.engine.session import ASKS_NOTE
    from retinue.messages import ToolCall
    from retinue.subagents.roles import with_initial_prompt
    from retinue.subagents.tools import (
        question_note,
        status_text,
        steering_ack,
        unknown_session,
        unload_confirmation,
        waiting_note,
    )
    from retinue.temporal._calls import (
        Delegation,
        error_result,
        read_delegation,
        read_unload,
        tool_result,
    )
    from retinue.temporal._repeats import Repeating
    from retinue.temporal._types import (
        OPEN_ACTIVITY,
        WORKFLOW_NAME,
        Admission,
        Agent,
        ChildRef,
        Closed,
        ConversationStart,
        Delivery,
        Json,
        OpenReply,
        OpenStep,
        Question,
        Reply,
    )

if TYPE_CHECKING:
    from retinue.engine.session import Consolidation

__all__ = ["VIEW_CHARS", "Sessions", "interrupted_note"]

STEER_PATCH = "retinue-subagent-steer"  # runs recorded before it refused SubAgent(steer=true)
OPEN_PATCH = "retinue-open-shielded"  # runs recorded before it let a cancel reach the start
FAILED_PATCH = "retinue-failed-run-dropped"  # runs recorded before it held a failed run
CLOSE_PATCH = "retinue-cut-run-closed"  # runs recorded before it only interrupted a cut run
VIEW_CHARS = 2_000  # of a session's last reply and question, in the ``session_view`` query


class Sessions(Repeating):
    """The sessions an agent's workflow holds (a base of the workflow class)."""

    _start: ConversationStart
    _agent: Agent
    _children: dict[str, ChildRef]  # by address (one-shot runs: by agent id)
    _opened: int
    _allowed: list[Json]  # the tree's "always" rules (a session opens with its parent's)
    _replies: dict[str, Reply]  # from its sessions, by token
    _ended: dict[str, Closed]  # its sessions that closed, by agent id
    _closing: set[str]  # its sessions closing, not yet closed
    _unloading: set[str]  # those whose close an unload waits for
    _admit: Callable[[Admission], Awaitable[str]]  # the caps' count (retinue.temporal._fanout)
    _messages: list[Json]
    _question: Question | None

    @workflow.query
    def session_view(self) -> Json:
        """What a front end lists of this session beside its node in the tree (one query,
        not its whole history): its history's length, its last reply and the question it
        asks its parent, each cut at ``VIEW_CHARS``."""
        said = (m.get("content") for m in reversed(self._messages) if m.get("role") == "assistant")
        last = next((c for c in said if isinstance(c, str) and c), "")
        asks = self._question.text[:VIEW_CHARS] if self._question is not None else None
        return {"messages": len(self._messages), "last_reply": last[:VIEW_CHARS], "question": asks}

    @property
    def _root(self) -> str:
        raise NotImplementedError

    async def _activity(
        self, name: str, arg: Any, kind: type, key: str, *, tool: bool = True,
        timeout_s: float | None = None, attempts: int | None = None,
    ) -> Any:  # fmt: skip
        raise NotImplementedError

    async def _signal(self, workflow_id: str, name: str, arg: Any = None) -> None:
        raise NotImplementedError

    async def _delegate(self, key: str, call: ToolCall) -> Json:
        limits = self._start.limits
        ask = read_delegation(call, limits.max_message_chars, limits.max_message_bytes)
        if isinstance(ask, str):
            return error_result(call, ask)
        if ask.steer and not workflow.patched(STEER_PATCH):  # (a run from before: refused)
            return error_result(call, "SubAgent steer is not available on Temporal yet")
        if ask.steer and (ack := await self._steer_child(ask)) is not None:
            return tool_result(call, ack)
        if (repeated := self._repeated_delegation(ask)) is not None:  # (not run: a note)
            return tool_result(call, repeated)
        child = self._children.get(ask.address) if ask.interactive else None
        task = ask.task
        if child is None:
            opened = await self._open(key, ask)
            if isinstance(opened, str):
                return error_result(call, opened)
            child, prompt = opened
            task = with_initial_prompt(prompt, task)
        child.busy = True
        try:
            reply = await self._message(child, task, key)
        except asyncio.CancelledError:  # (this agent's turn is cancelled: so is the session's)
            await self._interrupt_child(child)
            raise
        finally:
            child.busy = False
        child.question = reply.content if reply.stop_reason == "asking" else ""
        if reply.stop_reason not in ("failed", "interrupted"):  # (as its own count: asked counts)
            child.turns += 1
        if (
            child.one_shot
            and reply.stop_reason != "asking"
            and (  # (it closes itself)
                reply.stop_reason != "failed" or workflow.patched(FAILED_PATCH)
            )
        ):
            self._children.pop(child.address or child.agent_id, None)
        if reply.stop_reason == "failed":
            return tool_result(call, reply.content, error=True)
        if reply.stop_reason == "interrupted":  # (its own turn alone: this one goes on)
            reply = Reply(reply.token, interrupted_note(child), reply.stop_reason)
        if reply.stop_reason == "asking":
            self._hold_asking(child)
            note = question_note(reply.content, child.agent_id, child.role,
                                 _instance(child.address))  # fmt: skip
            return tool_result(call, note)
        if child.one_shot:
            return tool_result(call, reply.content)
        note = waiting_note(reply.content, child.agent_id, child.role, _instance(child.address))
        return tool_result(call, note)

    async def _steer_child(self, ask: Delegation) -> str | None:
        """``SubAgent(steer=true)`` to a session whose turn runs for this agent (another
        call of its step waits on it): the session gets the task before its next model call
        (``parent_steers`` signal), and the call is acknowledged at once. None: the session
        is not working, and the call gives it the task as a usual message (as in-process)."""
        child = self._children.get(ask.address)
        if child is None or not child.busy:
            return None
        try:
            await self._signal(child.workflow_id, "parent_steers", ask.task)
        except FailureError:  # its workflow is gone (the usual message says so)
            return None
        return steering_ack(child.agent_id, child.role, ask.instance, answered=False)

    async def _interrupt_child(self, child: ChildRef) -> None:
        """Cancel the turn ``child`` runs for this agent (its reply, when it comes, is not
        waited for); a one-shot run is closed too (counted closing by :meth:`_message`): one
        that asked just as the cancel came has no turn to interrupt, and would stay open."""
        try:
            await self._signal(child.workflow_id, "interrupt")
        except FailureError:  # its workflow is gone
            self._children.pop(child.address or child.agent_id, None)
            self._closing.discard(child.agent_id)
            return
        if child.one_shot:
            self._children.pop(child.address or child.agent_id, None)
            if workflow.patched(CLOSE_PATCH):  # (one that asked as the cancel came ends too)
                with contextlib.suppress(FailureError):
                    await self._signal(child.workflow_id, "close")

    def _hold_asking(self, child: ChildRef) -> None:
        """A one-shot run that asked is held under its role (or ``role:asked-n``), so the
        parent's next message to it answers it."""
        if child.address:
            return
        address = child.role
        if address in self._children:
            address = f"{child.role}:asked-{child.agent_id.rpartition('#')[2]}"
        self._children.pop(child.agent_id, None)
        child.address = address
        self._children[address] = child

    async def _open(self, key: str, ask: Delegation) -> tuple[ChildRef, str] | str:
        """Start a session's child workflow, if its role may be started here."""
        if len(self._children) >= self._start.limits.max_children:
            return f"this agent holds {len(self._children)} sessions: unload one first"
        self._opened += 1
        me, start = self._agent, self._start
        name = ask.address if ask.interactive else f"{ask.role}#{self._opened}"
        agent_id = f"{me.agent_id}/{name}"
        workflow_id = f"{workflow.info().workflow_id}/{name}"
        if ask.interactive:  # (one reopened after an unload must not meet the closing one)
            workflow_id += f"~{self._opened}"
        agent = Agent(agent_id, ask.role, [*me.chain, [agent_id, ask.role]],
                      workflow.info().workflow_id, self._root, not ask.interactive)  # fmt: skip
        opened = await self._activity(OPEN_ACTIVITY, OpenStep(start.tenant, start.conversation_id,
                                      agent), OpenReply, f"{key}/open")  # fmt: skip
        if opened.error:
            return opened.error
        if refused := await self._admit(Admission(f"{key}/admit", agent_id, ask.role, opened,
                                                  workflow.info().workflow_id)):  # fmt: skip
            return refused
        first = ConversationStart(start.tenant, start.conversation_id, limits=start.limits,
                                  agent=agent, allowed=list(self._allowed))  # fmt: skip
        child = ChildRef(agent_id, ask.role, ask.address if ask.interactive else "", workflow_id,
                         not ask.interactive)  # fmt: skip
        await self._start_child(child, first)
        return child, opened.initial_prompt

    async def _start_child(self, child: ChildRef, first: ConversationStart) -> None:
        """Start ``child``'s workflow and hold it. A turn cancelled meanwhile does not reach
        the start: the SDK would ask the child to cancel, and a session cancelled so ends
        without its close (nothing tells the caps, the tree or this agent); one not yet
        started would be dropped, still counted by the caps. So the start is shielded and
        ends, the session is held (this agent's close ends it), and a one-shot run, which
        nobody will message now, is closed at once; then the cancel goes on."""
        start = workflow.start_child_workflow(
            WORKFLOW_NAME,
            first,
            id=child.workflow_id,
            task_queue=workflow.info().task_queue,
            parent_close_policy=workflow.ParentClosePolicy.ABANDON,
        )
        if not workflow.patched(OPEN_PATCH):  # (a run from before: its start, as it was)
            await start
            self._hold_started(child)
            return
        started = asyncio.ensure_future(start)
        try:
            await asyncio.shield(started)
        except asyncio.CancelledError:
            await started  # (it has a session to hold, or it failed: that failure is raised)
            self._hold_started(child)
            if child.one_shot:
                await self._end_unsent(child)
            raise
        self._hold_started(child)

    def _hold_started(self, child: ChildRef) -> None:
        self._children[child.address or child.agent_id] = child

    async def _end_unsent(self, child: ChildRef) -> None:
        """Close a session no message was sent to (it closes without consolidating), and
        have this agent's close wait for it."""
        self._children.pop(child.address or child.agent_id, None)
        self._closing.add(child.agent_id)  # (before: its child_closed may come in the same task)
        try:
            await self._signal(child.workflow_id, "close")
        except FailureError:  # (its workflow is gone)
            self._closing.discard(child.agent_id)

    async def _message(self, child: ChildRef, text: str, token: str) -> Reply:
        """Send ``child`` a message and wait for its reply. A one-shot run closes itself
        after its reply (unless it asks), so it counts as closing from before the message:
        its ``child_closed`` signal may reach this workflow in the same workflow task as
        its reply, and is handled first (signals before the wake-up); counted after it,
        it would never be discounted, and this agent's close would wait for it forever."""
        if child.one_shot:
            self._closing.add(child.agent_id)
        try:
            await self._signal(child.workflow_id, "deliver",
                               Delivery(text, workflow.info().workflow_id, token))  # fmt: skip
        except FailureError:  # its workflow is gone (ended from outside)
            self._children.pop(child.address or child.agent_id, None)
            self._closing.discard(child.agent_id)
            return Reply(token, f"Error: session {child.agent_id} has ended", "failed")
        await workflow.wait_condition(lambda: token in self._replies)
        reply = self._replies.pop(token)
        if reply.stop_reason == "asking":  # (held, not closing, until answered)
            self._closing.discard(child.agent_id)
        return reply

    def _status(self, call: ToolCall) -> Json:
        """A ``SubAgentStatus`` call: the session's state as this agent knows it. A message
        to a session is answered before ``SubAgent`` returns, so no reply waits to be
        collected (``wait`` has nothing to wait for)."""
        read = read_unload(call)  # (the same arguments: role, instance)
        if isinstance(read, str):
            return error_result(call, read)
        child = self._children.get(read[1])
        if child is None:
            live = [c.agent_id for c in self._children.values()]
            return error_result(call, unknown_session(f"{self._agent.agent_id}/{read[1]}", live))
        state = "busy" if child.busy else "idle"
        if child.question:
            note = ASKS_NOTE.format(id=child.agent_id, question=child.question)
            state = f"asking ({note})"
        return tool_result(call, status_text(child.agent_id, state, child.turns, 0, []))

    async def _unload(self, call: ToolCall) -> Json:
        read = read_unload(call)
        if isinstance(read, str):
            return error_result(call, read)
        child = self._children.get(read[1])
        if child is None:
            live = [c.agent_id for c in self._children.values()]
            return error_result(call, unknown_session(f"{self._agent.agent_id}/{read[1]}", live))
        closed = await self._end(child)
        outcome = cast("Consolidation", closed.consolidation)
        said = unload_confirmation(closed.agent_id, closed.turns, outcome, began=closed.began)
        return tool_result(call, said)

    async def _end(self, child: ChildRef) -> Closed:
        """Close a session (it ends its own first, then consolidates) and wait for it."""
        self._children.pop(child.address or child.agent_id, None)
        aid = child.agent_id
        self._closing.add(aid)
        self._unloading.add(aid)
        try:
            await self._signal(child.workflow_id, "close")
            await workflow.wait_condition(lambda: aid in self._ended)
        except FailureError:  # (its workflow is gone: nothing more to close)
            self._closing.discard(aid)
            return self._ended.pop(aid, None) or Closed(aid, "none", 0, began=False)
        finally:
            self._unloading.discard(aid)
        self._closing.discard(aid)  # (its child_closed may have come before the close)
        return self._ended.pop(aid)


def interrupted_note(child: ChildRef) -> str:
    """What a parent reads of a session's turn interrupted from outside (a person, over the
    front end: its ``cancel_turn``), in the words of an in-process session's."""
    kept = "the run has ended" if child.one_shot else "the session is kept"
    return f"[turn of {child.agent_id} interrupted; {kept}]"


def _instance(address: str) -> str | None:
    return address.partition(":")[2] or None
