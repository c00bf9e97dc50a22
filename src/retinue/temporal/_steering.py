"""Steering on Temporal: a message for the running turn, as :meth:`Session.steer
<retinue.engine.session.Session.steer>` gives one in-process.

A person steers a turn with the workflow's ``steer`` Update (False: no turn runs, nothing is
kept); a parent agent steers its session's turn with ``SubAgent(steer=true)``, which reaches
the session as the ``parent_steers`` signal (a workflow cannot send Updates). The turn shows
the model what waits at its next step boundary, by the in-process loop's rule
(:data:`~retinue.engine.loop.STEERING_NOTE`): before each model call (joined to the turn's
own message when none has been sent yet), and after an answer that came while steering
waited (the model answers again, having read it); the turn's reply then says how many
steering messages it received (:data:`~retinue.engine.session.STEERED_NOTE`). What a turn
did not show (it came after its last model call, or as it was cancelled) waits for the next
turn's first model call, across continue-as-new. What waits is bounded: ``MAX_STEERING``
messages, ``Limits.max_message_bytes`` together. Deterministic, as workflow code must be: a
run that is never steered issues the commands it issued before steering existed.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from retinue.engine.loop import STEERING_NOTE
    from retinue.engine.session import STEERED_NOTE
    from retinue.messages import UserMessage, from_dict, to_dict
    from retinue.temporal._calls import unfit_text
    from retinue.temporal._types import ConversationStart, Json, TurnReply
    from retinue.temporal.refs import is_stub

__all__ = ["MAX_STEERING", "Steering"]

MAX_STEERING = 100  # steering messages waiting for a turn's next model call


class Steering:
    """The steering of a conversation workflow's turns (a mixin of it)."""

    _start: ConversationStart
    _messages: list[Json]
    _running: asyncio.Task[TurnReply] | None
    _closed: bool
    _interrupting: bool
    _steering: list[str]  # waiting for the next model call (the next turn's, if none runs)
    _steered: int  # shown to the model in the running turn

    @workflow.update
    def steer(self, text: str) -> bool:
        """Give the running turn ``text`` before its next model call. False if no turn
        runs (or it is being cancelled): nothing is kept."""
        if not self._turn_runs():
            return False
        self._steering.append(text)
        return True

    @steer.validator
    def _check_steer(self, text: str) -> None:
        if self._closed:
            raise ValueError("the conversation is closed")
        if problem := self._unfit_steering(text):
            raise ValueError(problem)

    @workflow.signal
    def parent_steers(self, text: str) -> None:
        """The parent's ``SubAgent(steer=true)``: it saw this session's turn running (one
        that ended meanwhile leaves it to the next turn). Its size was checked as a task's;
        past what may wait, it is dropped (logged)."""
        if problem := self._unfit_steering(text):
            workflow.logger.warning("steering dropped: %s", problem)
            return
        self._steering.append(text)

    def _turn_runs(self) -> bool:
        running = self._running
        return running is not None and not running.done() and not self._interrupting

    def _unfit_steering(self, text: str) -> str:
        """``""`` if ``text`` may wait for the turn, else why not (empty, too long, or what
        waits would be too large for the model call that shows it)."""
        limits = self._start.limits
        what = "the steering message"
        if unfit := unfit_text(text, what, limits.max_message_chars, limits.max_message_bytes):
            return unfit
        if len(self._steering) >= MAX_STEERING:
            return f"{MAX_STEERING} steering messages already wait for the turn's next step"
        waiting = sum(len(json.dumps(t)) for t in (*self._steering, text))
        if waiting > limits.max_message_bytes:
            return (
                f"the steering waiting for the turn's next step would be {waiting:,} bytes as"
                f" JSON, over the {limits.max_message_bytes:,} it may be: send it after that"
            )
        return ""

    def _show_steering(self) -> bool:
        """At a step boundary (before a model call, or after an answer): add what waits to
        the history as the in-process loop does; True if it added some. Never between a
        tool call and its result."""
        last = self._messages[-1] if self._messages else None
        if not self._steering or (last is not None and last.get("tool_calls")):
            return False
        texts, self._steering = self._steering, []
        self._steered += len(texts)
        note = STEERING_NOTE.format(text="\n\n".join(texts))
        said = from_dict(last) if last is not None and not is_stub(last) else None
        if isinstance(said, UserMessage):  # (not sent yet: one user message, not two)
            self._messages[-1] = to_dict(replace(said, content=f"{said.content}\n\n{note}"))
        else:
            self._messages.append(to_dict(UserMessage(note)))
        return True

    def _steered_reply(self, reply: TurnReply) -> TurnReply:
        """The turn's reply, saying how many steering messages it received (as in-process)."""
        if not self._steered:
            return reply
        return replace(reply, content=f"{reply.content}\n\n{STEERED_NOTE.format(n=self._steered)}")
