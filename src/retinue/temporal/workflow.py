"""The conversation workflow: the history as state, one turn per message.

One workflow class runs the main agent of a conversation and every sub-agent session below
it (a child workflow, whose :class:`~retinue.temporal._types.Agent` says who it is), so the
step logic is one: ask the model through an activity, read the step from the reply
(:func:`retinue.engine.loop.next_step`'s rule: tool calls run, an answer ends the turn), run
each tool call as an activity, append what comes back. Four calls the workflow answers
itself: ``SubAgent`` opens a child workflow (or continues one) and sends it the task;
``UnloadSubAgent`` closes one (it ends its own children, then consolidates its memory once,
keyed by its first run id); ``SubAgentStatus`` says what it knows of one; ``AskParent`` ends
the turn with the question, and the next message is its answer. A call that needs approval
waits (``approvals`` query) until the conversation's ``approve`` Update answers it, from any
client, however deep the session; an "always" answer's rule (the one the in-process policy
adds: that call's exact command, file or host, or the tool) allows what it matches for the
rest of the conversation in every session of its tree: the session that asked tells the
conversation's workflow (``rules_allowed`` signal), which tells every session it knows of,
keeps them across continue-as-new, and a session opens with its parent's. A tool call's
activity is tried ``Limits.tool_attempts`` times (or the tool's own ``attempts``) if its
tool is ``idempotent`` (a read; the model activity names them, and what each declares)
and once if not: one that did not finish (its worker died, or was stopped) is answered
"cut short, may have run", one past its timeout (``Limits.tool_timeouts``, else the
tool's own ``timeout_s``) "stopped, may have run in part".
The ``cancel_turn`` Update cancels the running turn: its activities, and the turns its
sessions run for it (``interrupt`` signal); the calls without a result are answered
"cancelled", and the conversation takes the next message. The ``steer`` Update gives the
running turn a message before its next model call (:mod:`retinue.temporal._steering`). The
sub-agent caps of the whole tree are counted by the conversation's workflow (``admit``
signal). Each model call's usage (its activity's ``ModelReply.spent``) is added up per
turn (``TurnReply.spent``) and per session (the ``usage`` query, ``session_view``, the
transcript kept at close), and carried across continue-as-new.

The history travels by reference (:mod:`retinue.temporal.refs`): a tool result over
``Limits.inline_bytes`` comes back from its activity as a stub (its head, its reference),
and each model call sends the stub of the history the previous call stored plus the messages
since (``ModelReply.stored``), so the workflow's history grows with the turns, not their
square; a run that continues as new carries the same.

Messages reach a main agent as ``send`` Updates; a parent's messages reach its sessions as
``deliver`` signals, answered by a ``reply`` signal (a workflow cannot send Updates). Each
session reports its state and its pending approvals to the conversation's workflow, which
answers the ``state`` query for the whole tree. Deterministic: no I/O, no clock, no
randomness. Turns run one at a time; between turns, past its
:class:`~retinue.temporal._types.Limits` (or when the server suggests it), a run continues as
new with its state; sessions outlive their parent's runs (``ParentClosePolicy.ABANDON``) and
close when unloaded or when their parent closes.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    ChildWorkflowError,
    FailureError,
    TimeoutType,
)
from temporalio.exceptions import (
    TimeoutError as TemporalTimeout,
)

with workflow.unsafe.imports_passed_through():
    from retinue.engine.loop import close_pending_calls
    from retinue.messages import (
        AssistantMessage,
        ToolCall,
        UserMessage,
        from_dict,
        to_dict,
    )
    from retinue.temporal._calls import (
        cut_short,
        cut_to_payload,
        error_result,
        read_question,
        timed_out,
        tool_result,
        unfit_text,
    )
    from retinue.temporal._fanout import FanOutCounting
    from retinue.temporal._role_run import RoleRuns
    from retinue.temporal._sessions import Sessions
    from retinue.temporal._steering import Steering
    from retinue.temporal._types import (
        CONSOLIDATE_ACTIVITY,
        KEEP_ACTIVITY,
        MODEL_ACTIVITY,
        NOT_ON_TEMPORAL,
        TOOL_ACTIVITY,
        WORKFLOW_NAME,
        Agent,
        ApprovalAnswer,
        Closed,
        ConsolidateStep,
        ConversationStart,
        ConversationState,
        Delivery,
        HistoryPage,
        Json,
        ModelReply,
        ModelStep,
        Outline,
        PendingApproval,
        Question,
        Reply,
        SessionNode,
        Spent,
        ToolOutcome,
        ToolStep,
        TurnReply,
    )

__all__ = ["ConversationWorkflow", "stopped_note"]

_FAILURES = (FailureError,)  # an activity's (retries spent), a signal's, too long
MAX_ASKS = 3  # approvals one call may wait for (a hook that rewrites it asks again)
MAX_ALLOWED = 1_000  # "always" rules a conversation keeps (the first ones)
STATUS_TOOL = "SubAgentStatus"
OPENING_CHARS = 200  # of the first user message, in the ``outline`` query
INTERRUPTED_NOTE = "Stopped: the turn was cancelled."
# a close keeps the transcript of the main agent, and of a session closed before its first
# turn (KEEP_ACTIVITY); a run recorded before it did not
KEEP_PATCH = "retinue-keep-transcripts"


def _retry(attempts: int) -> RetryPolicy:
    return RetryPolicy(maximum_attempts=attempts, initial_interval=timedelta(seconds=1))


def _call_dict(call: ToolCall) -> Json:
    return {"id": call.id, "name": call.name, "arguments": call.arguments}


async def _refused(call: ToolCall, why: str) -> Json:
    return error_result(call, why)


def stopped_note(limit: int) -> str:
    return (
        f"Stopped: the agent made {limit} model calls without a final answer "
        f"(max_iterations={limit})."
    )


@workflow.defn(name=WORKFLOW_NAME)
class ConversationWorkflow(FanOutCounting, Sessions, Steering, RoleRuns):
    @workflow.init
    def __init__(self, start: ConversationStart) -> None:
        self._start = start
        self._agent = start.agent or Agent(start.conversation_id)
        self._messages: list[Json] = list(start.messages)
        self._step = start.step
        self._turns = start.turns
        self._question = start.question
        self._opened = start.opened
        self._children = {c.address or c.agent_id: c for c in start.children}
        self._sessions = {n.agent_id: n for n in start.sessions}  # (the main agent's)
        self._fanout = start.fanout  # the tree's sessions, counted (the main agent's)
        self._admitted: dict[str, str] = {}  # the answers to its admissions, by token
        self._turn = asyncio.Lock()
        self._running: asyncio.Task[TurnReply] | None = None
        self._closed = False
        self._state = "idle"
        self._last_input = 0  # the last model call's input tokens (AutoCompress's estimate)
        self._local: set[str] = set()  # the workflow's own calls this agent may make
        self._idempotent: set[str] = set()  # the tools the last model reply calls that are
        self._timeouts: dict[str, float] = {}  # and what they declare: a call's time, each try
        self._tries: dict[str, int] = {}  # (an idempotent one's tries)
        self._ended_as = "final"  # a reply without calls ends the turn so ("refused": guards)
        self._interrupting = False  # the running turn is being cancelled (cancel_turn)
        self._replies: dict[str, Reply] = {}  # from its sessions, by token
        self._ended: dict[str, Closed] = {}  # its sessions that closed, by agent id
        self._closing: set[str] = set()  # its sessions closing, not yet closed
        self._unloading: set[str] = set()  # those whose close an unload waits for
        self._answers: dict[str, ApprovalAnswer] = {}  # to its own approval requests
        self._pending: dict[str, PendingApproval] = {}  # the tree's (the main agent's)
        self._allowed: list[Json] = list(start.allowed)  # "always" answers' rules, the tree's
        # the stub of the history the last model call stored, and how many of the messages
        # it holds: the next call sends it and those after (retinue.temporal.refs)
        self._base: Json | None = None
        self._based = 0
        self._inline = start.limits.inline_bytes  # a tool result past it goes by reference
        self._opening_text = start.opening  # (the outline's, when the history lacks it)
        self._steering = list(start.steering)  # for the next model call (._steering)
        self._steered = 0  # shown in the running turn
        self._spent = start.spent  # by the session's model calls, every run's
        self._turn_spent = Spent()  # by the running (or the last) turn's
        self._failed = start.failed  # its last turn failed

    # -- life ----------------------------------------------------------------------------

    @workflow.run
    async def run(self, start: ConversationStart) -> list[Json]:
        """Live until closed; continue as new when the history has grown past its bound."""
        await workflow.wait_condition(
            lambda: self._closed or (not self._turn.locked() and self._too_long())
        )
        # (a close that comes while the handlers drain still closes: children, consolidation)
        await workflow.wait_condition(lambda: self._closed or workflow.all_handlers_finished())
        if self._closed:
            await self._close()
            await workflow.wait_condition(workflow.all_handlers_finished)
            return self._messages
        workflow.continue_as_new(self._carried())

    def _carried(self) -> ConversationStart:
        start = self._start
        return ConversationStart(
            start.tenant, start.conversation_id, self._compact(), self._step, start.limits,
            start.agent, self._question, list(self._children.values()), self._opened,
            self._turns, list(self._sessions.values()), self._fanout, list(self._allowed),
            self._opening(), list(self._steering), self._spent, self._failed,
        )  # fmt: skip

    def _compact(self) -> list[Json]:
        """The history as it travels: the stored part's stub (if a model call stored one)
        and the messages after it. With large results by reference, this is what keeps
        each model call's payload, and the history carried to a new run, small."""
        if self._base is None:
            return list(self._messages)
        return [self._base, *self._messages[self._based :]]

    def _too_long(self) -> bool:
        info, limits = workflow.info(), self._start.limits
        return (
            info.get_current_history_length() >= limits.max_events
            or info.get_current_history_size() >= limits.max_history_bytes
            or info.is_continue_as_new_suggested()
        )

    @property
    def agent(self) -> Agent:
        """Who this workflow runs (its turns' spans name it: :mod:`retinue.temporal.tracing`)."""
        return self._agent

    @property
    def _root(self) -> str:
        return self._agent.root or workflow.info().workflow_id

    @property
    def _is_root(self) -> bool:
        return not self._agent.root

    async def _close(self) -> None:
        """End the running turn and every session held, then (a session) consolidate once
        and tell the parent."""
        if self._running is not None and not self._running.done():
            self._running.cancel()
        await workflow.wait_condition(lambda: not self._turn.locked())
        for child in list(self._children.values()):
            await self._end(child)
        await workflow.wait_condition(lambda: not self._closing)
        if self._is_root:
            if self._keeps_main() and workflow.patched(KEEP_PATCH):
                await self._keep()
            self._state = "closed"
            return
        began = self._turns > 0 or any(m.get("role") == "user" for m in self._messages)
        outcome = await self._consolidate() if began else "none"
        if not began and workflow.patched(KEEP_PATCH):
            await self._keep()  # (its transcript: "empty", as in process)
        await self._report("closed")
        closed = Closed(self._agent.agent_id, outcome, self._turns, began)
        await self._signal(self._agent.parent, "child_closed", closed)

    def _keeps_main(self) -> bool:
        """Whether the main agent's close keeps its transcript: not a role run's holder
        (its conversation is the run's alone, and keeps none, as in process)."""
        return bool(self._messages) or self._turns > 0 or not self._opened

    async def _consolidate(self) -> str:
        try:
            return await self._closing_activity(CONSOLIDATE_ACTIVITY, "consolidate", str)
        except ActivityError:
            return "failed"

    async def _keep(self) -> None:
        """Keep the transcript (alone: nothing is consolidated); one that cannot be kept
        does not stop the close."""
        try:
            await self._closing_activity(KEEP_ACTIVITY, "keep")
        except ActivityError:
            workflow.logger.warning("the transcript of %s was not kept", self._agent.agent_id)

    async def _closing_activity(self, name: str, key: str, kind: type | None = None) -> Any:
        """An activity of the close, on the session's history and what it used (keyed by
        its first run id: one, however often it is tried)."""
        limits, info = self._start.limits, workflow.info()
        step = ConsolidateStep(self._start.tenant, self._start.conversation_id, self._agent,
                               self._compact(), info.first_execution_run_id, self._spent,
                               self._failed)  # fmt: skip
        return await workflow.execute_activity(
            name, step, result_type=kind, activity_id=f"{info.workflow_id}/{key}",
            start_to_close_timeout=timedelta(seconds=limits.model_timeout_s),
            heartbeat_timeout=timedelta(seconds=limits.heartbeat_s),
            retry_policy=_retry(limits.model_attempts),
        )  # fmt: skip

    @workflow.signal
    def close(self) -> None:
        self._closed = True

    @workflow.update
    async def cancel_turn(self) -> bool:
        """Cancel the running turn: its model call or tool calls in flight (their
        activities are cancelled), and the turns its sessions run for it. Its calls without
        a result are answered "cancelled", its reply's ``stop_reason`` is
        ``"interrupted"``, and the conversation takes the next message. False if no turn
        was running."""
        return await self._interrupt()

    @workflow.signal
    async def interrupt(self) -> None:
        """A parent's turn was cancelled while this session answered it: cancel its turn."""
        await self._interrupt()

    async def _interrupt(self) -> bool:
        running = self._running
        if running is None or running.done() or self._closed:
            return False
        self._interrupting = True
        running.cancel()
        await workflow.wait_condition(lambda: self._running is not running)
        return True

    # -- messages ------------------------------------------------------------------------

    @workflow.update
    async def send(self, text: str) -> TurnReply:
        """Run one turn on the message ``text`` (the answer, if the agent asked a question);
        its answer is the reply."""
        try:
            return await self._turn_on(text)
        except asyncio.CancelledError:
            raise ApplicationError("the conversation was closed", non_retryable=True) from None

    @send.validator
    def _check_send(self, text: str) -> None:
        if self._closed:
            raise ValueError("the conversation is closed")
        limits = self._start.limits
        if unfit := unfit_text(text, "the message", limits.max_message_chars,
                               limits.max_message_bytes):  # fmt: skip
            raise ValueError(unfit)  # (else it would enter the history, and jam it)

    @workflow.signal
    async def deliver(self, delivery: Delivery) -> None:
        """A parent's message: run the turn, send the reply back (a one-shot run then
        closes, unless it asked a question)."""
        try:
            turn = await self._turn_on(delivery.text)
            reply = Reply(delivery.token, self._bounded(turn.content), turn.stop_reason,
                          turn.spent)  # fmt: skip
        except ApplicationError as exc:
            reply = Reply(delivery.token, f"Error: {exc.message}", "failed")
        except asyncio.CancelledError:
            reply = Reply(delivery.token, "Error: the session was closed", "failed")
        try:
            await self._signal(delivery.reply_to, "reply", reply)
        except FailureError:  # (its parent is gone)
            workflow.logger.warning("the parent of %s is gone", self._agent.agent_id)
        if self._agent.one_shot and reply.stop_reason != "asking":
            self._closed = True

    @workflow.signal
    def reply(self, reply: Reply) -> None:
        self._replies[reply.token] = replace(reply, content=self._bounded(reply.content))

    def _bounded(self, content: str) -> str:
        """A session's reply, cut to a message's size (the signal that carries it, and the
        parent's history that holds it, are bounded)."""
        limits = self._start.limits
        return cut_to_payload(content, limits.max_message_chars, limits.max_message_bytes,
                              "the session's reply")  # fmt: skip

    @workflow.signal
    def child_closed(self, closed: Closed) -> None:
        """A session closed. Kept for the close that waits for it (an unload's, or this
        agent's own close, for a session still held: its close comes before the wait)."""
        aid = closed.agent_id
        if aid in self._unloading or any(c.agent_id == aid for c in self._children.values()):
            self._ended[aid] = closed
        self._closing.discard(aid)

    async def _turn_on(self, text: str) -> TurnReply:
        if self._closed:
            raise ApplicationError("the session is closed", non_retryable=True)
        if len(text) > self._start.limits.max_message_chars:
            raise ApplicationError("the message is too long", non_retryable=True)
        async with self._turn:
            self._interrupting = False
            self._turn_spent = Spent()
            self._running = asyncio.create_task(self._turn_body(text))
            evicted = False
            try:
                return replace(await self._running, spent=self._turn_spent)
            except asyncio.CancelledError:
                if not self._interrupting or self._closed:
                    raise
                return TurnReply(INTERRUPTED_NOTE, "interrupted", self._step)  # (before it began)
            except GeneratorExit:  # (the worker drops it from its cache: no await now)
                evicted = True
                raise
            finally:
                self._running = None
                if not evicted:
                    await self._report("asking" if self._question else "idle")

    async def _turn_body(self, text: str) -> TurnReply:
        if self._is_root:
            self._fanout.run = 0  # (the caps' count of sessions started in this turn)
        self._steered = 0
        self._failed = False
        await self._report("busy")
        asked = self._question
        if asked is not None:  # the message answers the question the agent asked
            self._question = None
            self._messages.append(tool_result(ToolCall(asked.call_id, "AskParent", ""), text))
        else:
            self._messages.append(to_dict(UserMessage(text)))
        try:
            reply = await self._run_turn()
        except (*_FAILURES, asyncio.CancelledError) as exc:
            if self._interrupting and not self._closed:  # cancel_turn
                self._close_turn(INTERRUPTED_NOTE)  # (its calls in flight: "cancelled")
                return TurnReply(INTERRUPTED_NOTE, "interrupted", self._step)
            if isinstance(exc, asyncio.CancelledError):
                self._close_turn("Stopped: the session was closed while this turn ran.")
                raise
            cause = exc.cause if isinstance(exc, ActivityError | ChildWorkflowError) else None
            why = f"Stopped: {cause or exc}"
            self._failed = True
            self._close_turn(why)
            raise ApplicationError(why, non_retryable=True) from exc
        self._turns += 1
        return self._steered_reply(reply)

    def _close_turn(self, note: str) -> None:
        """End a failed turn as an interrupted one ends: every call answered, then ``note``."""
        self._question = None
        messages = [from_dict(m) for m in self._messages]
        before = len(messages)
        close_pending_calls(messages)
        self._messages.extend(to_dict(m) for m in messages[before:])
        self._messages.append(to_dict(AssistantMessage(note)))

    # -- the step logic (one for the main agent and every session) -----------------------

    async def _run_turn(self) -> TurnReply:
        limits = self._start.limits
        self._start_counting()  # (the loop detectors: retinue.temporal._repeats)
        for iteration in range(1, limits.max_iterations + 1):
            self._show_steering()  # (what came since the last step, the turn's start included)
            message = await self._ask_model()
            if not message.tool_calls:  # ("refused": a guard's note closes the turn)
                if self._answers_again(iteration):  # steering came during the call
                    continue
                return TurnReply(message.content, self._ended_as, self._step)
            if (note := self._refused_step(message.tool_calls)) is not None:
                return TurnReply(note, "repeated_call", self._step)  # (told, and again)
            self._step += 1
            start = len(self._messages)
            await self._run_calls(message.tool_calls)
            if self._question is not None:  # AskParent: the next message answers it
                return TurnReply(self._question.text, "asking", self._step)
            self._observed_step(message.tool_calls, start)
            if self._stop_note is not None:  # the same task delegated again after a note
                self._messages.append(to_dict(AssistantMessage(self._stop_note)))
                return TurnReply(self._stop_note, "repeated_call", self._step)
        note = stopped_note(limits.max_iterations)
        self._messages.append(to_dict(AssistantMessage(note)))
        return TurnReply(note, "max_iterations", self._step)

    def _answers_again(self, iteration: int) -> bool:
        """After an answer: steering that came while it was asked for is shown, and the
        model answers again (not past the turn's last model call, nor after a guard's note)."""
        more = iteration < self._start.limits.max_iterations
        return more and self._ended_as != "refused" and self._show_steering()

    async def _run_calls(self, calls: Sequence[ToolCall]) -> None:
        """Run one step's calls at once; their results go to the history in the calls'
        order. When one fails, or the turn is cancelled, the others are cancelled, and those
        that finished keep their results (the turn's end answers the rest)."""
        ids = [c.id for c in calls]
        unique = len(set(ids)) == len(ids) and all(ids)  # (else the index tells them apart)
        limits = self._start.limits
        most = limits.max_calls  # (Temporal: 2,000 pending activities per workflow)
        # the step's results travel together in the next model call: each its share of it
        share = limits.max_payload_bytes // (2 * max(1, min(len(calls), most)))
        self._inline = min(limits.inline_bytes, share) if limits.inline_bytes > 0 else 0
        tasks = [
            asyncio.create_task(
                self._call(c.id if unique else f"{i}:{c.id}", c)
                if i < most
                else _refused(c, f"over the {most} calls one step may make; it did not run")
            )
            for i, c in enumerate(calls)
        ]
        try:
            await workflow.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        except asyncio.CancelledError:  # (not on GeneratorExit: an evicted run awaits nothing)
            await self._settle(tasks)
            raise
        await self._settle(tasks)
        for task in tasks:
            task.result()  # (the first failure, if one failed)

    async def _settle(self, tasks: list[asyncio.Task[Json | None]]) -> None:
        """Cancel the calls still running, wait for them, and keep the results of those that
        finished."""
        if rest := [t for t in tasks if not t.done()]:
            for task in rest:
                task.cancel()
            await workflow.wait(rest)
        done = [t for t in tasks if not t.cancelled() and t.exception() is None]
        self._messages.extend(r for t in done if (r := t.result()) is not None)

    async def _call(self, key_id: str, call: ToolCall) -> Json | None:
        """Run one call; None: its result comes later (a question's answer)."""
        if call.name in self._local:
            if call.name == "AskParent":
                return self._ask(call)
            if call.name == "SubAgent":
                return await self._delegate(self._key(key_id), call)
            if call.name == STATUS_TOOL:
                return self._status(call)
            return await self._unload(call)
        # (SubAgentStatus not offered: answered so, as before it was served, for replays)
        if call.name in NOT_ON_TEMPORAL or call.name == STATUS_TOOL:
            return error_result(call, f"{call.name} is not available on Temporal yet")
        return await self._run_tool(self._key(key_id), call)

    async def _ask_model(self) -> AssistantMessage:
        self._step += 1
        start, limits = self._start, self._start.limits
        sent = self._compact()  # (the stored history's stub and what is new since)
        size = len(json.dumps(sent))
        if size > limits.max_payload_bytes:
            what = (
                "the conversation's history is"
                if self._base is None
                else "the messages since its stored history are"
            )
            raise ApplicationError(
                f"{what} {size} bytes, over the {limits.max_payload_bytes} one Temporal"
                " payload may carry here (2 MB at most; workers with a memory store send"
                " the history by reference): start a new conversation"
            )
        info = workflow.info()
        grown = info.get_current_history_size() + size
        if grown > limits.max_run_history_bytes or (
            info.get_current_history_length() >= limits.max_run_events
        ):
            raise ApplicationError(
                f"this turn has made the workflow's history too long ({grown} bytes,"
                f" {info.get_current_history_length()} events) for one more model call;"
                " send the next message to go on"
            )
        step = ModelStep(self._key(), start.tenant, start.conversation_id, sent,
                         self._last_input, start.agent, limits.inline_bytes)  # fmt: skip
        reply = await self._activity(MODEL_ACTIVITY, step, ModelReply, self._key(), tool=False)
        message = from_dict(reply.message)
        if not isinstance(message, AssistantMessage):
            raise ApplicationError(f"the model activity returned a {message.role} message")
        if reply.history is not None:  # AutoCompress shortened it (by reference: its stub)
            self._opening_text = self._opening()
            self._messages[:] = reply.history
            self._base, self._based = None, 0
        if reply.stored is not None:  # the history sent (or shortened) is in the store
            self._base, self._based = reply.stored, len(self._messages)
        self._last_input = reply.input_tokens
        self._count(reply)
        self._local = set(reply.local)
        self._idempotent = set(reply.idempotent)
        self._timeouts, self._tries = reply.timeouts, reply.attempts
        self._ended_as = "refused" if reply.refused else "final"
        self._messages.append(reply.message)
        return message

    def _count(self, reply: ModelReply) -> None:
        """Add the call's usage to the turn's and the session's (a reply of a worker that
        did not say it: its tokens, one request, its cost unknown)."""
        spent = reply.spent
        if spent is None:
            spent = Spent(reply.input_tokens, reply.output_tokens, 0, 1, None)
        self._turn_spent = self._turn_spent.plus(spent)
        self._spent = self._spent.plus(spent)

    @workflow.query
    def session_view(self) -> Json:
        """:meth:`Sessions.session_view`, with what the session's model calls used."""
        spent = self._spent
        return {**super().session_view(), "input_tokens": spent.input_tokens,
                "output_tokens": spent.output_tokens, "cost_usd": spent.cost_usd}  # fmt: skip

    @workflow.query
    def usage(self) -> Spent:
        """What the session's model calls used (every run's)."""
        return self._spent

    async def _run_tool(self, key: str, call: ToolCall) -> Json:
        """A tool call's activity; one that waits for approval runs again once answered."""
        start, limits = self._start, self._start.limits
        step = ToolStep(key, start.tenant, start.conversation_id, _call_dict(call), start.agent,
                        allowed=list(self._allowed), inline_bytes=self._inline)  # fmt: skip
        # a read is tried again; a call that may have had an effect runs once
        reads = call.name in self._idempotent
        # the client's Limits.tool_timeouts first, then what the tool declares of itself
        own = self._timeouts.get(call.name, limits.tool_timeout_s)
        timeout = limits.tool_timeouts.get(call.name, own)
        tries = self._tries.get(call.name, limits.tool_attempts) if reads else 1
        try:
            outcome = await self._activity(TOOL_ACTIVITY, step, ToolOutcome, key,
                                           timeout_s=timeout, attempts=tries)  # fmt: skip
            for attempt in range(MAX_ASKS):
                if outcome.approval is None:
                    break
                # (each ask its own id: an answer, sent again, never answers the next request)
                answer = await self._approval(f"{key}/ask-{attempt}", outcome.approval)
                step = replace(step, answered=outcome.approval, answer=answer)
                outcome = await self._activity(TOOL_ACTIVITY, step, ToolOutcome,
                                               f"{key}/{attempt}", timeout_s=timeout,
                                               attempts=tries)  # fmt: skip
                if outcome.allowed:  # (an "always" answer: its rule, for the whole tree)
                    await self.rules_allowed(outcome.allowed)
        except ActivityError as exc:
            unfinished = self._unfinished(call, exc, timeout, tries)
            if unfinished is None:
                raise
            return unfinished
        if outcome.result is None:
            return error_result(call, "the call asked for approval again and again; it did not run")
        return outcome.result

    def _unfinished(
        self, call: ToolCall, exc: ActivityError, timeout: float, tries: int
    ) -> Json | None:
        """The result of a call whose activity did not finish: stopped past its timeout, or
        its worker died (or was stopped) on its last try: one that is not idempotent was not
        tried again and may have run. None: the failure ends the turn (the turn is being
        cancelled or closed, or a worker refused the call: it serves another tenant)."""
        cause = exc.cause
        if self._interrupting or self._closed:
            return None
        if isinstance(cause, ApplicationError) and cause.non_retryable:
            return None
        if isinstance(cause, TemporalTimeout) and cause.type == TimeoutType.START_TO_CLOSE:
            return timed_out(call, timeout, tries)
        if call.name not in self._idempotent:
            return cut_short(call)
        return error_result(call, f"the call failed on each of its {tries} tries: {cause or exc}")

    async def _activity(
        self, name: str, arg: Any, kind: type, key: str, *, tool: bool = True,
        timeout_s: float | None = None, attempts: int | None = None,
    ) -> Any:  # fmt: skip
        limits = self._start.limits
        if timeout_s is None:
            timeout_s = limits.tool_timeout_s if tool else limits.model_timeout_s
        if attempts is None:
            attempts = limits.tool_attempts if tool else limits.model_attempts
        return await workflow.execute_activity(
            name, arg, result_type=kind, activity_id=key,
            start_to_close_timeout=timedelta(seconds=timeout_s),
            heartbeat_timeout=timedelta(seconds=limits.heartbeat_s),
            retry_policy=_retry(attempts),
        )  # fmt: skip

    def _key(self, call_id: str = "") -> str:
        """The idempotency key of this step (and call): unique in the conversation, across
        runs that continued as new."""
        base = f"{workflow.info().workflow_id}/{self._step}"
        return f"{base}/{call_id}" if call_id else base

    # -- questions -----------------------------------------------------------------------

    def _ask(self, call: ToolCall) -> Json | None:
        limits = self._start.limits
        read = read_question(call, limits.max_message_chars, limits.max_message_bytes)
        if isinstance(read, str):
            return error_result(call, read)
        if self._question is not None:
            return error_result(call, "one question at a time: ask it after this one's answer")
        self._question = Question(call.id, read[0])
        return None

    # -- approvals -----------------------------------------------------------------------

    async def _approval(self, key: str, request: Json) -> ApprovalAnswer:
        """Wait for a person's answer to ``request``, reported to the conversation's
        workflow (whose ``approve`` Update answers it) under the id ``key``."""
        request = {**request, "id": key}
        await self._report("paused")  # (first: whoever sees the request sees the state)
        await self._signal(self._root, "approval_pending",
                           PendingApproval(request, workflow.info().workflow_id))  # fmt: skip
        try:
            await workflow.wait_condition(lambda: key in self._answers)
        except asyncio.CancelledError:
            await self._signal(self._root, "approval_withdrawn", key)
            raise
        await self._report("busy")
        return self._answers.pop(key)

    @workflow.signal
    def approval_pending(self, pending: PendingApproval) -> None:
        self._pending[str(pending.request["id"])] = pending

    @workflow.signal
    def approval_withdrawn(self, request_id: str) -> None:
        self._pending.pop(request_id, None)

    @workflow.signal
    async def rules_allowed(self, rules: list[Json]) -> None:
        """Rules "always" answers added in the tree: kept; the conversation's workflow
        (told by the session that asked) tells every session it knows of."""
        known = {r.get("text") for r in self._allowed}
        added = [r for r in rules if r.get("text") not in known]
        added = added[: max(0, MAX_ALLOWED - len(self._allowed))]
        if not added:
            return
        self._allowed.extend(added)
        targets = (
            [n.workflow_id for n in self._sessions.values()] if self._is_root else [self._root]
        )
        for workflow_id in targets:
            try:
                await self._signal(workflow_id, "rules_allowed", added)
            except FailureError:  # (a session that has just closed)
                workflow.logger.warning("%s did not take the allowed rules", workflow_id)

    @workflow.signal
    def approval_answer(self, answer: ApprovalAnswer) -> None:
        self._answers[answer.id] = answer

    @workflow.update
    async def approve(self, answer: ApprovalAnswer) -> None:
        """Answer a pending approval request of the conversation (of any session in it)."""
        pending = self._pending.pop(answer.id)
        await self._signal(pending.workflow_id, "approval_answer", answer)

    @approve.validator
    def _check_approve(self, answer: ApprovalAnswer) -> None:
        if answer.id not in self._pending:
            raise ValueError(f"no approval request {answer.id[:200]!r} is pending")

    # -- the tree, as the conversation's workflow knows it --------------------------------

    async def _report(self, state: str) -> None:
        """Tell the conversation's workflow this session's state (the main agent: keep it)."""
        self._state = state
        if self._is_root:
            return
        me = self._agent
        parent = me.chain[-2][0] if len(me.chain) > 1 else self._start.conversation_id
        node = SessionNode(me.agent_id, me.role, parent, workflow.info().workflow_id, state,
                           self._turns)  # fmt: skip
        await self._signal(self._root, "session_state", node)

    @workflow.signal
    def session_state(self, node: SessionNode) -> None:
        if node.state == "closed":
            self._sessions.pop(node.agent_id, None)
            self.released(node.agent_id)
        else:
            self._sessions[node.agent_id] = node

    async def _signal(self, workflow_id: str, name: str, arg: Any = None) -> None:
        if workflow_id == workflow.info().workflow_id:  # (the conversation's own report)
            getattr(self, name)(*(() if arg is None else (arg,)))
            return
        handle = workflow.get_external_workflow_handle(workflow_id)
        await (handle.signal(name) if arg is None else handle.signal(name, arg))

    # -- queries -------------------------------------------------------------------------

    @workflow.query
    def history(self) -> list[Json]:
        return self._messages

    @workflow.query
    def history_since(self, start: int) -> HistoryPage:
        """The history's length and its messages from index ``start`` on: what a front end
        polls while a turn runs (each poll carries what is new, not the whole history)."""
        return HistoryPage(len(self._messages), self._messages[max(0, start) :])

    @workflow.query
    def outline(self) -> Outline:
        """The history's length and the start of its first user message: a list of
        conversations reads this, not each whole history."""
        return Outline(len(self._messages), self._opening())

    def _opening(self) -> str:
        """The start of the first user message (of an earlier run's, if it is not here)."""
        first = next((m for m in self._messages if m.get("role") == "user"), None)
        if first is None:
            return self._opening_text
        opening = first.get("content")
        return opening[:OPENING_CHARS] if isinstance(opening, str) else ""

    @workflow.query
    def last_turn(self) -> list[Json]:
        """The messages after the last user message: the calls of the latest turn."""
        rows = self._messages
        last = next((i for i in reversed(range(len(rows))) if rows[i].get("role") == "user"), -1)
        return rows[last + 1 :]

    @workflow.query
    def steps(self) -> int:
        return self._step

    @workflow.query
    def approvals(self) -> list[Json]:
        """The approval requests pending anywhere in the conversation (its workflow's)."""
        return [p.request for p in self._pending.values()]

    @workflow.query
    def state(self) -> ConversationState:
        """What a front end shows: busy, idle, paused (an approval or a question waits on
        a person) or closed; what waits; the session tree."""
        state = self._state
        if state != "closed" and (self._pending or self._question is not None):
            state = "paused"
        elif state != "closed" and self._turn.locked():
            state = "busy"
        question = self._question.text if self._question is not None else None
        return ConversationState(state, self.approvals(), question, list(self._sessions.values()))
