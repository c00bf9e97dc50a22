"""The session: one conversation that runs turns, the primitive for everything with turns.

The main agent's conversation, each conversation of the HTTP service and every interactive
sub-agent are a :class:`Session`. It keeps what configures its turns (``config``, a
:class:`~retinue.engine.config.RunConfig`) apart from its history (``run_state``, a
:class:`~retinue.engine.config.RunState`, which each turn extends), and:

* runs turns **one at a time, in arrival order** — a turn takes its place in the queue when
  :meth:`~Session.send` or :meth:`~Session.start` (background) is called, before anything
  awaits, so a background send issued before a foreground one runs first;
* runs each turn in a task of its own, so :meth:`~Session.interrupt` stops the running turn
  without ending the session, and a cancelled waiter takes only its own turn down;
* keeps the history valid for the next turn whatever happened: a cancelled turn's pending
  tool calls get results and the turn gets a closing note, a failed turn gets a note saying
  why (never two user messages in a row);
* counts every model call's tokens against its budget, failed and interrupted turns included;
* lets a running turn **ask** (:meth:`~Session.ask`, what the ``AskParent`` tool calls): the
  turn pauses in place, the waiter of its :meth:`~Session.send` gets the question (output
  ``stop_reason="asking"``; a background turn's question goes to :attr:`inbox`), and the next
  message sent is the answer: the same turn goes on, no new turn starts;
* takes **steering** (:meth:`~Session.steer`) for the running turn: the run shows it to the
  model before its next model call, and the turn's reply says it was received; steering the
  model has not seen when the turn ends (interrupted, or after its last model call) goes
  with the next turn's message, and the interrupted turn's reply says so;
* reports, with a question (``stop_reason="asking"``), the tokens its turn used so far;
* :meth:`~Session.resume` runs a turn with no new message, from the history as it stands
  (the last step's calls without a result run first): a turn stored cut short goes on;
* has an explicit state machine::

      idle ⇄ running ⇄ asking
        ↘      ↓       ↙
           closing → closed

  :meth:`~Session.close` is idempotent and finishes even when its caller is cancelled (the
  work runs in a task the session owns, and the caller waits for it with ``finish``). It
  cancels the queued and running turns, ends the session's children first, then
  consolidates exactly once — one recorded state, not luck.

What differs between kinds of session (the system prompt, who the children are, where the
memory goes) comes in as :class:`Lifecycle` hooks. The run loop reports back to the session
as its config's observer (:class:`~retinue.engine.observer.RunObserver`: usage, step
boundaries, steering), and what a paused turn waits on is one value,
:attr:`Session.paused` (:class:`~retinue.engine.pause.Paused`).

A **durable** session (see :mod:`retinue.durable`) has a :class:`Recorder`: the session hands
it its state at every step boundary (a turn's start, each model reply and each step's tool
results, a question, the turn's end, closing), and a recorded session is rebuilt elsewhere
with :meth:`~Session.restore_state` and :meth:`~Session.park` (a question asked before the
restart, answered by the next message). :meth:`~Session.suspend` lets go of a session without
ending it: its turns stop unrecorded, nothing is consolidated, and the record stays as it was
for another process to go on from.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Literal, Protocol, TypeVar

from retinue import _tracer
from retinue._tasks import cancel_and_wait, finish
from retinue.engine.config import RunConfig, RunOutput, RunState
from retinue.engine.loop import close_pending_calls, run_pending_calls, run_turn
from retinue.engine.observer import RunTracer, TurnSpan
from retinue.engine.pause import ASK_TOOL_NAME, Paused, Question, asking
from retinue.errors import SessionClosedError, SessionError
from retinue.memory.consolidate import consolidation_run
from retinue.messages import (
    AssistantMessage,
    MediaPart,
    Message,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from retinue.policy.hooks import (
    MAX_STOP_BLOCKS,
    hooks_of,
    prompt_submitted,
    session_began,
    session_ended,
    stop_hooks,
)
from retinue.telemetry.prices import cost_usd, format_cost

__all__ = [
    "ASKS_NOTE",
    "FAILED_NOTE",
    "INTERRUPTED_NOTE",
    "Consolidation",
    "Lifecycle",
    "Recorder",
    "Session",
    "SessionState",
    "current_session",
    "repair_history",
]

SessionState = Literal["idle", "running", "asking", "closing", "closed"]
Consolidation = Literal["done", "failed", "none"]  # what close() did with the history

INTERRUPTED_NOTE = "[This turn was interrupted before it finished.]"
FAILED_NOTE = "[This turn failed before it finished: {error}]"
ASKS_NOTE = "[session {id} asks: {question}]"
STEERED_NOTE = "[{n} steering message(s) received during this turn]"
WITHDRAWN_NOTE = (
    "[your message was not delivered: the session asked this while its earlier turn ran; "
    "answer the question, then send your message again]"
)
STEERING_KEPT_NOTE = "{n} steering message(s) not seen yet, kept for its next turn"

_NO_STEERING: list[str] = []  # shared, never changed
_NO_CALL = ToolCall("", ASK_TOOL_NAME)  # a question asked with no call in the history

_running: ContextVar[Session | None] = ContextVar("retinue_running_session", default=None)

T = TypeVar("T")


def _with(items: tuple[T, ...], item: T) -> tuple[T, ...]:
    return (*items, item)


def _without(items: tuple[T, ...], item: T) -> tuple[T, ...]:
    return tuple(x for x in items if x is not item) if item in items else items


def current_session() -> Session | None:
    """The session whose turn is running the calling code (a tool), if any."""
    return _running.get()


@dataclass(frozen=True, slots=True)
class Lifecycle:
    """What a session asks of its owner; every hook is optional.

    ``system_prompt`` is rendered at the first turn (after a restore too: see
    :meth:`Session.restore_state`). ``end_children`` ends the sessions this
    one holds (at close; and after every turn when ``children_per_turn``, as for the main
    agent, whose "run" is one user message). ``consolidate`` writes the history to memory and
    says whether that worked. ``transcript`` keeps the ended session's transcript (see
    :mod:`retinue.engine.transcripts`; it never raises). ``closed`` is told once the session
    is closed.
    """

    system_prompt: Callable[[], Awaitable[str]] | None = None
    end_children: Callable[[], Awaitable[object]] | None = None
    consolidate: Callable[[Sequence[Message]], Awaitable[Consolidation]] | None = None
    transcript: Callable[[Session], Awaitable[None]] | None = None
    closed: Callable[[Session], None] | None = None
    children_per_turn: bool = False


async def _until_hooks_let_stop(config: RunConfig, state: RunState, out: RunOutput) -> RunOutput:
    """Stop / SubagentStop hooks that block the stop with a reason send the agent back to
    work with it as a user message, at most ``MAX_STOP_BLOCKS`` times a turn."""
    for n in range(MAX_STOP_BLOCKS):
        if out.stop_reason not in ("final", "waiting_for_input"):
            break
        more = await stop_hooks(config.context, out.content, active=n > 0)
        if more is None:
            break
        state.messages.append(UserMessage(more))
        out = await run_turn(config, state)
    return out


class Recorder(Protocol):
    """Where a durable session's state goes (:mod:`retinue.durable`).

    ``record`` writes the session's state and history as they are now, and finishes even if
    its caller is cancelled; ``touch`` asks for such a write without waiting (a change made
    outside a turn, such as steering); ``forget`` removes the record (the session ended);
    ``child`` records a sub-agent session of this one's, in the same tree.
    """

    run_id: str | None
    """The id the session's consolidation runs under (kept in its record once it closes)."""

    async def record(self, session: Session) -> None: ...

    def touch(self, session: Session) -> None: ...

    async def forget(self, session: Session) -> None: ...

    def child(self, session_id: str, *, kind: str, role: str, instance: str | None) -> Recorder:
        """The recorder of a session that this one's session holds (a sub-agent)."""
        ...


def _mid_turn(messages: Sequence[Message]) -> bool:
    """Whether ``messages`` end inside a turn: after its user message or its calls, with no
    answer yet (a restored history whose turn was cancelled before it went on)."""
    last = messages[-1] if messages else None
    if last is None or isinstance(last, SystemMessage):
        return False
    return not isinstance(last, AssistantMessage) or bool(last.tool_calls)


def repair_history(messages: list[Message], note: str) -> None:
    """Close an unfinished turn: answer its pending tool calls, then end it with ``note``."""
    close_pending_calls(messages)
    last = messages[-1] if messages else None
    if not isinstance(last, AssistantMessage) or last.tool_calls:
        messages.append(AssistantMessage(note))


class Session:
    """One conversation with turns (see the module docstring).

    Its small collections (queued turns, background turns, wakers, steering) are tuples,
    rebuilt on change: an idle session holds the shared empty tuple, not a set or a deque
    of its own, and thousands of idle sessions stay cheap (they are rarely more than one
    or two long).
    """

    __slots__ = (
        "_answer",
        "_background",
        "_closed",
        "_closing",
        "_current",
        "_queue",
        "_stale_prompt",
        "_steered",
        "_steering",
        "_turn_used",
        "_turns",
        "_used",
        "_waiters",
        "_wakers",
        "budget_usd",
        "config",
        "consolidation",
        "id",
        "inbox",
        "last_reply",
        "lifecycle",
        "paused",
        "recorder",
        "run_state",
        "started_at",
        "token_budget",
        "turns",
    )

    def __init__(
        self,
        id: str,
        config: RunConfig,
        lifecycle: Lifecycle | None = None,
        *,
        token_budget: int | None = None,
        budget_usd: float | None = None,
        state: RunState | None = None,
    ) -> None:
        self.id = id
        self.config = config
        # its history: ``state``, else the one its config was made with (the form before
        # RunState, kept for one release), else a new one
        history = config.history
        if state is None:
            state = RunState([] if history is None else history)
        self.run_state = state
        self.lifecycle = lifecycle or Lifecycle()
        self.token_budget = token_budget
        self.budget_usd = budget_usd  # US dollars the session may spend (retinue.telemetry)
        self.turns = 0
        self.started_at = time.time()  # (Unix seconds: its transcript says when it began)
        # the usage figures as a tuple of ints, which the cyclic collector soon stops
        # tracking (a Usage record per model call would be one more object it walks)
        self._used = (0, 0, 0, 0)
        self._turn_used = self._used  # the figures when the running turn began
        self.last_reply = ""
        self.inbox: list[str] = []  # replies of background turns, not yet collected
        self.consolidation: Consolidation | None = None  # set once, by close()
        # one ticket per turn, in order (None for a turn queued first: it need not wait)
        self._queue: tuple[asyncio.Future[None] | None, ...] = ()
        self._turns: tuple[asyncio.Task[RunOutput], ...] = ()
        self._background: tuple[asyncio.Task[RunOutput], ...] = ()
        self._current: asyncio.Task[RunOutput] | None = None
        self._closing: asyncio.Task[Consolidation] | None = None
        self._closed = False
        self.paused: Paused | None = None  # what the turn waits on (a question), if any
        self._answer: asyncio.Future[str] | None = None
        # send()s waiting for their turn (None while there are none: idle sessions are many)
        self._waiters: dict[asyncio.Task[RunOutput], asyncio.Future[str | None]] | None = None
        self._wakers: tuple[asyncio.Future[None], ...] = ()  # wait_background()s
        self._steering: tuple[str, ...] = ()  # steering not yet shown to the running turn
        self._steered = 0  # steering messages shown to the model, all turns together
        self._stale_prompt = False  # a restored history: its system prompt is rendered anew
        self.recorder: Recorder | None = None  # a durable session's (see set_recorder())
        config.observer = self  # (a RunObserver: usage, steps, steering)

    # -- what can be seen from outside ---------------------------------------------------

    @property
    def state(self) -> SessionState:
        if self._closed:
            return "closed"
        if self._closing is not None:
            return "closing"
        if self.question is not None:
            return "asking"
        return "running" if self._current is not None else "idle"

    @property
    def question(self) -> str | None:
        """The question the session's turn waits on (running, or parked: see :meth:`park`)."""
        paused = self.paused
        return None if paused is None or paused.question is None else paused.question.text

    @property
    def usage(self) -> Usage:
        """Tokens used by every model call of the session so far."""
        return Usage(*self._used)

    @property
    def cost_usd(self) -> float | None:
        """What the session's model calls cost in US dollars; None when the price of its
        model is unknown (see :mod:`retinue.telemetry.prices`)."""
        return cost_usd(self.config.model.name, self.usage)

    @property
    def messages(self) -> list[Message]:
        return self.run_state.messages

    @property
    def background(self) -> int:
        """Background turns not finished yet."""
        return len(self._background)

    @property
    def steered(self) -> int:
        """Steering messages the model has been shown, all turns together."""
        return self._steered

    @property
    def pending_steering(self) -> tuple[str, ...]:
        """Steering messages the model has not been shown yet."""
        return self._steering

    @property
    def usage_figures(self) -> tuple[int, int, int, int]:
        """:attr:`usage` as (input, output, cache-read tokens, requests), for a record."""
        return self._used

    # -- durability (retinue.durable) ----------------------------------------------------

    def set_recorder(self, recorder: Recorder | None) -> None:
        """Record this session's state at every step boundary from now on (None: stop)."""
        self.recorder = recorder

    # -- what the run loop tells it (engine.observer.RunObserver) -------------------------

    @property
    def records(self) -> bool:
        """Whether the run's step boundaries are recorded (a durable session's)."""
        return self.recorder is not None

    async def step(self) -> None:
        """A step boundary of the running turn: record the session's state."""
        recorder = self.recorder
        if recorder is not None:
            await recorder.record(self)

    def used(self, usage: Usage) -> None:
        """A model call's usage, counted as it comes."""
        i, o, c, r = self._used
        self._used = (
            i + usage.input_tokens,
            o + usage.output_tokens,
            c + usage.cache_read_tokens,
            r + usage.requests,
        )

    def restore_state(
        self,
        messages: list[Message],
        *,
        turns: int = 0,
        usage: tuple[int, int, int, int] = (0, 0, 0, 0),
        steering: Sequence[str] = (),
        inbox: Sequence[str] = (),
    ) -> None:
        """Take a recorded session's state (before its first turn here): its history as it
        stands (calls without a result stay so, for :meth:`resume`), the turns and tokens it
        counted, steering not yet shown, and background replies not yet collected. The next
        turn renders the system prompt anew: it replaces the one the history was saved with
        (or goes first, if the history has none), so instructions changed since apply."""
        if self._turns or self._closing is not None or self.run_state.messages:
            raise SessionError(f"session {self.id} has begun: restore it before its first turn")
        self.run_state.messages = messages
        self._stale_prompt = bool(messages)
        self.turns = turns
        i, o, c, r = usage
        self._used = self._turn_used = (i, o, c, r)
        self._steering = tuple(steering)
        self.inbox = list(inbox)

    def park(self, paused: Paused) -> None:
        """The history ends with ``paused``'s question call (an ``AskParent``) unanswered,
        asked before a restart: the session is asking with no turn running, and the next
        message sent (:meth:`send` or :meth:`start`) becomes the call's result and goes on
        with the same turn."""
        if self._current is not None or self._closing is not None:
            raise SessionError(f"session {self.id} is busy: only an idle session is parked")
        if paused.question is None:
            raise SessionError(f"session {self.id}: only a question is parked in a session")
        self.paused = paused

    def start_resume(self) -> asyncio.Task[RunOutput]:
        """:meth:`resume` as a background turn (its reply goes to :attr:`inbox`): a turn
        that was running when its process stopped goes on here. It ends none of this
        session's children when it is over (``children_per_turn``): the tree revived with it
        goes on, a sub-agent waiting for approval included."""
        turn = self._enqueue(None, keep_children=True)
        self._detach(turn)
        return turn

    async def suspend(self) -> None:
        """Let go of this session without ending it: stop recording, cancel its turns, and
        close it here with no consolidation and no close hooks; its record stays as last
        written, for another process to restore. Idempotent."""
        self.set_recorder(None)
        if self._closing is not None:
            await finish(self._closing)
            return
        self._closing = asyncio.create_task(self._let_go(), name=f"suspend {self.id}")
        await finish(self._closing)

    async def _let_go(self) -> Consolidation:
        turns = set(self._turns)
        for turn in turns:
            turn.cancel()
        if turns:
            await asyncio.wait(turns)
        self._closed = True
        self.consolidation = "none"
        return "none"

    def tasks(self) -> set[asyncio.Task[RunOutput]]:
        """Turns queued or running (for tests and inspection)."""
        return set(self._turns)

    # -- turns ---------------------------------------------------------------------------

    def send(
        self,
        text: str,
        *,
        on_start: Callable[[], None] | None = None,
        parts: tuple[MediaPart, ...] = (),
    ) -> Coroutine[object, object, RunOutput]:
        """Run one turn after the turns sent before it, and return its output.

        If the running turn is asking, ``text`` is the answer instead: that turn goes on and
        its output (or its next question) is returned. A turn that asks returns with
        ``stop_reason`` ``"asking"`` and the question as ``content``. An interrupted turn (or
        one ended by :meth:`close`) returns with ``stop_reason`` ``"interrupted"``;
        cancelling the caller cancels the turn and propagates. ``on_start`` is called when
        the turn's time comes (at once for an answer), before it does anything. ``parts``
        (images, documents) follow the text in the user message (or the answer).
        """
        return self._send(text, on_start, parts)  # (a plain def: no coroutine more per turn)

    def resume(
        self, *, on_start: Callable[[], None] | None = None
    ) -> Coroutine[object, object, RunOutput]:
        """Run one turn that goes on from the history as it stands, with no new message: the
        calls of its last step that have no result yet run first (a history restored with a
        call that waited for approval when the service stopped), then the model carries on.
        Otherwise as :meth:`send`."""
        return self._send(None, on_start)

    async def _send(
        self,
        text: str | None,
        on_start: Callable[[], None] | None,
        parts: tuple[MediaPart, ...] = (),
    ) -> RunOutput:
        turn = self._deliver_answer(text) if text is not None and not parts else None
        if turn is not None:
            self._background = _without(self._background, turn)  # to this caller again
            if on_start is not None:
                on_start()
        else:
            turn = self._enqueue(text, on_start, parts)
        # one future for either outcome: the turn's question (ask), or None once it is done
        asked: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        if self._waiters is None:
            self._waiters = {}
        self._waiters[turn] = asked
        try:
            question = await asked  # set by ask(), or by _leave() once the turn is done
        except asyncio.CancelledError:
            await cancel_and_wait(turn)
            raise
        finally:
            waiters = self._waiters
            if waiters is not None and waiters.get(turn) is asked:
                del waiters[turn]
                if not waiters:
                    self._waiters = None
        if question is not None:  # with what the turn has used so far
            used = (a - b for a, b in zip(self._used, self._turn_used, strict=True))
            paused = self.paused
            return RunOutput(
                question, self.run_state.messages, "asking", usage=Usage(*used), paused=paused
            )
        if not turn.cancelled():
            return turn.result()
        # cancelled before it could start (only close() does that), or on its very last step
        if self._closing is not None:
            raise self._refused()
        return self._interrupted()

    def start(self, text: str, parts: tuple[MediaPart, ...] = ()) -> asyncio.Task[RunOutput]:
        """Queue a background turn (or answer the running turn's question, letting it go on
        in the background); its reply, failure or next question goes to :attr:`inbox`.
        ``parts`` follow the text in the user message (as :meth:`send`'s)."""
        turn = (None if parts else self._deliver_answer(text)) or self._enqueue(text, None, parts)
        self._detach(turn)
        return turn

    async def wait_background(self) -> None:
        """Wait until the background turns started so far are done, or one asks a question."""
        pending = self._background
        while any(t in self._background for t in pending) and self.question is None:
            waker = asyncio.get_running_loop().create_future()
            self._wakers = _with(self._wakers, waker)
            try:
                await waker
            finally:
                self._wakers = _without(self._wakers, waker)

    def steer(self, text: str) -> bool:
        """Give the running turn ``text`` at its next step boundary (between tool calls,
        before its next model call). A pending question is answered by ``text`` instead, the
        turn going on in the background. False if no turn is running (nothing is done)."""
        if not text.strip():
            raise SessionError(f"empty message for session {self.id}: say what it should do")
        if self._closing is not None or self._current is None:
            return False
        if self.question is None:
            self._steering = _with(self._steering, text)
            if self.recorder is not None:
                self.recorder.touch(self)
        else:
            self.start(text)
        return True

    async def ask(self, question: str) -> str:
        """Called by the running turn (a tool of it): pause until the next message answers
        ``question``, and return that answer. The waiter of the turn gets the question."""
        turn = self._current
        if turn is None or self._closing is not None:
            raise SessionError(f"session {self.id} has no running turn to ask from")
        if self.question is not None:
            raise SessionError(
                f"session {self.id} already waits for an answer to {self.question!r}: "
                "ask one question at a time"
            )
        answer = self._answer = asyncio.get_running_loop().create_future()
        # its call in the history (a tool that asks without one: a call of no id)
        call = asking(self.run_state.messages, question) or Question(_NO_CALL, question)
        self.paused = Paused(call)
        waiter = self._waiters.pop(turn, None) if self._waiters else None
        if waiter is not None and not waiter.done():
            self._detach(turn)  # until an answer comes, nobody waits for this turn
            waiter.set_result(question)
        else:
            self.inbox.append(ASKS_NOTE.format(id=self.id, question=question))
            self._hand_over(turn, question)
        self._wake()
        try:
            if self.recorder is not None:  # asking: the question is recorded with the call
                await self.recorder.record(self)
            return await answer
        finally:
            if self._answer is answer:  # not answered (cancelled): no longer asking
                self.paused = self._answer = None

    def _hand_over(self, turn: asyncio.Task[RunOutput], question: str) -> None:
        """A background turn asks while a send() waits behind it: that send would wait for
        ever (the answer it waits to give comes after it). It gets the question instead,
        its own message withdrawn (:data:`WITHDRAWN_NOTE`), and the next message answers."""
        for queued, waiter in list((self._waiters or {}).items()):
            if queued is not turn and not waiter.done() and not queued.done():
                waiter.set_result(f"{question}\n{WITHDRAWN_NOTE}")
                queued.cancel()
                return

    def _deliver_answer(self, text: str) -> asyncio.Task[RunOutput] | None:
        """If the running turn is asking: answer it with ``text`` and return that turn."""
        answer, turn = self._answer, self._current
        if answer is None or answer.done() or turn is None or self._closing is not None:
            return None
        if not text.strip():
            raise SessionError(f"empty answer for session {self.id}: say what it should know")
        answer.set_result(text)
        self.paused = self._answer = None  # running again from now on
        return turn

    def _detach(self, turn: asyncio.Task[RunOutput]) -> None:
        """From now on ``turn``'s reply goes to :attr:`inbox` (unless a send takes it back)."""
        if turn not in self._background:
            self._background = _with(self._background, turn)
            turn.add_done_callback(self._collect)

    def _wake(self) -> None:
        for waker in self._wakers:
            if not waker.done():
                waker.set_result(None)

    def steering(self) -> list[str]:
        """Before each model call (:class:`~retinue.engine.observer.RunObserver`): the
        steering not shown yet; a money budget spent stops the turn here."""
        if self.budget_usd is not None:  # before each model call: a money budget stops it
            last = self.messages[-1] if self.messages else None
            if not isinstance(last, AssistantMessage):  # (not after a reply: it is paid for)
                self._check_money()
        if not self._steering:  # (before every model call: the usual case costs nothing)
            return _NO_STEERING
        texts, self._steering = self._steering, ()
        self._steered += len(texts)
        if _tracer.current is not None:  # on the turn's span
            tracer: RunTracer = _tracer.current
            tracer.event("retinue.steered", **{"retinue.steering.count": len(texts)})
        return list(texts)

    def collect(self) -> list[str]:
        """The background replies that arrived since the last call."""
        replies, self.inbox = self.inbox, []
        return replies

    def interrupt(self) -> bool:
        """Cancel the running turn (the session stays). True if a turn was running."""
        turn = self._current
        if turn is None or turn.done() or self._closing is not None:
            return False
        turn.cancel()
        return True

    def _enqueue(
        self,
        text: str | None,
        on_start: Callable[[], None] | None = None,
        parts: tuple[MediaPart, ...] = (),
        *,
        keep_children: bool = False,
    ) -> asyncio.Task[RunOutput]:
        if text is not None and not text.strip() and not parts:
            raise SessionError(f"empty message for session {self.id}: say what it should do")
        if self._closing is not None:
            raise self._refused()
        parked = self.paused if self._answer is None else None
        if text is not None and parked is not None and parked.question is not None:
            call, self.paused = parked.question.call, None  # the restored question's answer
            self.messages.append(ToolResultMessage(call.id, call.name, text, parts=parts))
            text = None  # the same turn goes on
        # a turn queued behind others waits for its ticket; the first one has none to wait for
        ticket = asyncio.get_running_loop().create_future() if self._queue else None
        self._queue = _with(self._queue, ticket)
        # The turn's own context says which session runs it (what its tools see); it also
        # runs the turn's done callback (which starts only once the turn is over), and that
        # finds the session there: no context copy, no bound method, no closure per turn.
        context = contextvars.copy_context()
        context.run(_running.set, self)
        turn = asyncio.create_task(
            self._turn(text, ticket, on_start, parts, keep_children),
            name=f"turn of {self.id}",
            context=context,
        )
        self._turns = _with(self._turns, turn)
        turn.add_done_callback(self._leave, context=context)
        return turn

    async def _turn(
        self,
        text: str | None,
        ticket: asyncio.Future[None] | None,
        on_start: Callable[[], None] | None,
        parts: tuple[MediaPart, ...] = (),
        keep_children: bool = False,
    ) -> RunOutput:
        """One turn, in its own task (one coroutine: each level of a turn in flight is one
        more object for the cyclic collector); whatever happens, the history stays valid."""
        if ticket is not None:
            try:
                await ticket  # the turns sent before this one are done
            except asyncio.CancelledError:
                if self._closing is not None:
                    raise self._refused() from None
                raise  # its waiter went away before its time came
        if self._closing is not None:
            raise self._refused()
        self._check_budget()
        self._current = asyncio.current_task()  # type: ignore[assignment]
        self._turn_used = self._used
        messages, began = self.run_state.messages, False
        traced = None if _tracer.current is None else self._trace_turn(_tracer.current, text)
        try:
            if on_start is not None:
                on_start()
            hooked = hooks_of(self.config.context) is not None  # Claude Code hooks
            if self._stale_prompt or not messages:
                self._stale_prompt = False
                await self._render_prompt(messages, hooked)
            if text is None:  # resume(): the last step's calls without a result run first
                began = True
                await run_pending_calls(self.config, self.run_state)
            else:
                if hooked:  # UserPromptSubmit (the main agent's): may add context, or refuse
                    text = await prompt_submitted(self.config.context, text)
                messages.append(UserMessage(text, parts))
                began = True
            if self.recorder is not None:  # running, with its message
                await self.recorder.record(self)
            steered = self._steered
            out = await run_turn(self.config, self.run_state)
            if hooked:  # Stop / SubagentStop: may send the agent back to work
                out = await _until_hooks_let_stop(self.config, self.run_state, out)
            if self._steered > steered:
                out.content += "\n\n" + STEERED_NOTE.format(n=self._steered - steered)
            self.turns += 1
            self.last_reply = out.content
            if traced is not None:
                traced.ok(self._turn_usage(), out.content, out.stop_reason)
            return out
        except asyncio.CancelledError:
            if traced is not None:
                traced.fail("cancelled", self._turn_usage())
            if began:
                repair_history(messages, INTERRUPTED_NOTE)
            elif self._closing is not None:
                raise self._refused() from None
            return self._interrupted()
        except Exception as exc:
            if began:
                repair_history(messages, FAILED_NOTE.format(error=f"{type(exc).__name__}: {exc}"))
            raise
        finally:
            self._current = None
            if self._closing is not None:
                self._steering = ()  # no next turn to show it to
            # else steering the model has not seen (it came as the turn was interrupted, or
            # after its last model call) stays for the next turn's first model call
            lifecycle = self.lifecycle
            if lifecycle.children_per_turn and not keep_children and lifecycle.end_children:
                await lifecycle.end_children()
            if self.recorder is not None and self._closing is None:  # idle (or asking) again
                await self.recorder.record(self)
            if traced is not None:
                traced.end()

    async def _render_prompt(self, messages: list[Message], hooked: bool) -> None:
        """Put the system prompt first in ``messages``: a new history's, or in place of the
        one a restored history was saved with (see :meth:`restore_state`)."""
        if self.lifecycle.system_prompt is None:
            return
        prompt = await self.lifecycle.system_prompt()
        if hooked:  # SessionStart / SubagentStart: their context joins the prompt
            prompt += await session_began(self.config.context)
        if messages and isinstance(messages[0], SystemMessage):
            messages[0] = SystemMessage(prompt)
        else:
            messages.insert(0, SystemMessage(prompt))

    def _trace_turn(self, tracer: RunTracer, text: str | None) -> TurnSpan:
        ctx = self.config.context
        return tracer.begin_turn(
            session_id=self.id,
            agent_id=ctx.agent_id,
            role=ctx.role,
            depth=ctx.depth,
            interactive=self.config.interactive,
            model=self.config.model.name,
            text=text,
        )

    def _turn_usage(self) -> Usage:
        return Usage(*(a - b for a, b in zip(self._used, self._turn_used, strict=True)))

    def _refused(self) -> SessionClosedError:
        return SessionClosedError(f"session {self.id} was closed before this message")

    def _interrupted(self) -> RunOutput:
        how = (
            "ended: the session was closed" if self._closing else "interrupted; the session is kept"
        )
        if self._steering and self._closing is None:
            how += f"; {STEERING_KEPT_NOTE.format(n=len(self._steering))}"
        return RunOutput(f"[turn of {self.id} {how}]", self.run_state.messages, "interrupted")

    @staticmethod
    def _leave(turn: asyncio.Task[RunOutput]) -> None:
        """``turn`` is done (even if cancelled before it started): take its ticket out of the
        queue (``_turns`` and ``_queue`` are in step: a turn and its ticket at one index), if
        it was at the head let the next turn go, then wake the send() waiting for it.

        It runs in the turn's own context, where its session is the running one."""
        session = _running.get()
        assert session is not None  # (set in that context before the turn was created)
        at = session._turns.index(turn)
        session._turns = _without(session._turns, turn)
        session._queue = session._queue[:at] + session._queue[at + 1 :]
        if at == 0 and session._queue:
            head = session._queue[0]
            if head is not None and not head.done():
                head.set_result(None)
        asked = session._waiters.get(turn) if session._waiters else None
        if asked is not None and not asked.done():
            asked.set_result(None)

    def _check_budget(self) -> None:
        budget, used = self.token_budget, self._used[0] + self._used[1]
        if budget is not None and used >= budget:
            raise SessionError(
                f"session {self.id} has used {used} tokens, its budget is {budget}: "
                f"end it (what it learned is kept in its memory) and start a new one"
            )
        if self.budget_usd is not None:
            self._check_money()

    def _check_money(self) -> None:
        if self.budget_usd is not None:
            cost = self.cost_usd
            if cost is None:
                raise SessionError(
                    f"session {self.id} has a budget of ${self.budget_usd} but the price of "
                    f"{self.config.model.name} is unknown: set it in [model_prices] of config.toml"
                )
            if cost >= self.budget_usd:
                raise SessionError(
                    f"session {self.id} has spent {format_cost(cost)}, its budget is "
                    f"${self.budget_usd}: end it (what it learned is kept in its memory) "
                    "and start a new one"
                )

    def _collect(self, turn: asyncio.Task[RunOutput]) -> None:
        if turn not in self._background:
            return  # a send took it back (it answered the turn's question)
        self._background = _without(self._background, turn)
        self._wake()
        if turn.cancelled():
            return
        exc = turn.exception()
        self.inbox.append(f"Error: {exc}" if exc is not None else turn.result().content)
        if self.recorder is not None:  # the reply waits for its parent, recorded
            self.recorder.touch(self)

    # -- closing -------------------------------------------------------------------------

    async def close(self) -> Consolidation:
        """End the session (idempotent): cancel its turns, end its children, consolidate once.

        The work runs in a task the session owns; a cancelled caller still waits for it to
        finish, then its cancellation propagates.
        """
        return await finish(self.closing())

    def closing(self) -> asyncio.Task[Consolidation]:
        """Begin closing now (without waiting) and return the task that does it."""
        if self._closing is None:
            self._closing = asyncio.create_task(self._close(), name=f"close {self.id}")
        return self._closing

    async def _close(self) -> Consolidation:
        try:
            turns = set(self._turns)
            for turn in turns:
                turn.cancel()
            if turns:
                await asyncio.wait(turns)
            if self.lifecycle.end_children is not None:
                await self.lifecycle.end_children()
            if self.paused is not None and self._answer is None:  # parked, never answered
                self.paused = None
                repair_history(self.run_state.messages, INTERRUPTED_NOTE)
            elif _mid_turn(self.run_state.messages):  # a revived turn cut before it went on
                repair_history(self.run_state.messages, INTERRUPTED_NOTE)
            recorder = self.recorder
            if recorder is not None:  # closing: a restart finishes the close, not the turn
                await recorder.record(self)  # (with the id its consolidation runs under)
                consolidation_run.set(recorder.run_id)  # (this close's own task: its context)
            outcome: Consolidation = "none"
            if self.lifecycle.consolidate is not None:
                outcome = await self.lifecycle.consolidate(list(self.run_state.messages))
            self.consolidation = outcome
            if self.lifecycle.transcript is not None:
                await self.lifecycle.transcript(self)
            if recorder is not None:
                await recorder.forget(self)
            if self.run_state.messages and hooks_of(self.config.context) is not None:
                await session_ended(self.config.context)  # SessionEnd (the main agent's)
            return outcome
        finally:
            self._closed = True
            if self.lifecycle.closed is not None:
                self.lifecycle.closed(self)
