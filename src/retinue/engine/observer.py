"""What the run loop tells the ones that watch it, declared: :class:`RunObserver` and
:class:`RunTracer`.

The loop (:func:`~retinue.engine.loop.run`) knows nothing of sessions, budgets, journals or
OpenTelemetry; it reports through two interfaces it declares here, which the layers that
care implement instead of installing callbacks into the run or being called by name:

* the **observer** of its :class:`~retinue.engine.config.RunConfig` (a
  :class:`~retinue.engine.session.Session` is one): the usage of each model call as it comes
  (so a turn that fails or is cancelled still counts what it spent), each step boundary
  (after a model reply joins the history and after a step's tool results do: where a
  durable session records its state, :mod:`retinue.durable`) and, before each model call,
  the steering that arrived meanwhile;
* the **tracer** (:class:`RunTracer`), one per process, installed in :mod:`retinue._tracer`
  by :mod:`retinue.telemetry.trace` when tracing is enabled: a span per turn (the session's),
  per model call and per tool call, one per compression, and events on the current span.
  The engine reads the slot before each hook; tracing off, that is one ``is None`` test and
  no call, and the engine does not import the telemetry package's tracing at all.

Progress events go to the tool context's sink (:mod:`retinue.events`), as before.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from retinue.messages import Message, ToolCall, ToolResultMessage, Usage

__all__ = ["ModelCallSpan", "RunObserver", "RunTracer", "TurnSpan"]


class RunObserver(Protocol):
    """Hears a run as it goes (see the module docstring). ``records`` says whether
    :meth:`step` wants each step boundary (false: the loop does not call it, and a step
    costs nothing more)."""

    @property
    def records(self) -> bool: ...

    def used(self, usage: Usage) -> None:
        """A model call's usage, as it comes."""
        ...

    def steering(self) -> list[str]:
        """Before a model call: the messages that arrived for the model since the last one
        (empty: none). It may raise to stop the run (a money budget spent)."""
        ...

    async def step(self) -> None:
        """A step boundary: the history holds a whole model reply or a whole step's results."""
        ...


class TurnSpan(Protocol):
    """A turn's span (:meth:`RunTracer.begin_turn`), current while the turn runs."""

    def ok(self, usage: Usage, content: str, stop_reason: str) -> None:
        """The turn answered (or paused): what it used, said and why it stopped."""
        ...

    def fail(self, reason: str, usage: Usage | None = None) -> None:
        """The turn ended without an answer (``cancelled``, or the error)."""
        ...

    def end(self) -> None:
        """End the span, once, in the turn's ``finally`` (an error unless :meth:`ok` ran)."""
        ...


class ModelCallSpan(Protocol):
    """A model call's span (:meth:`RunTracer.begin_model_call`)."""

    def end(self, usage: Usage | None, output: Message | None = None) -> None:
        """End it with the call's usage and reply, or (``usage`` None) as failed."""
        ...


class RunTracer(Protocol):
    """Traces runs (see the module docstring). Each span begins as a child of the current one;
    a turn's, and a tool call's while it runs, is current (a sub-agent's turn started by a
    tool call is its child)."""

    def begin_turn(
        self,
        *,
        session_id: str,
        agent_id: str,
        role: str,
        depth: int,
        interactive: bool,
        model: str,
        text: str | None,
    ) -> TurnSpan:
        """A session's turn begins (in the turn's own task), with its message ``text``
        (None: a resumed turn)."""
        ...

    def begin_model_call(self, model: str, messages: Sequence[Message]) -> ModelCallSpan:
        """A model call begins, with what is sent."""
        ...

    async def tool_calls(
        self,
        calls: Sequence[ToolCall],
        run_one: Callable[[ToolCall], Awaitable[list[ToolResultMessage]]],
    ) -> list[ToolResultMessage]:
        """Run a step's ``calls`` (in parallel), each as ``run_one(call)`` does, inside a span
        of its own that is current while it runs; their results, in order."""
        ...

    def compress(self, *, hard: bool, reason: str) -> AbstractContextManager[Any]:
        """A span around one compression of the history (``reason``: ``threshold``,
        ``manual``, ``context_too_long``), current inside it."""
        ...

    def event(self, name: str, **attributes: Any) -> None:
        """An event on the current span (steering shown to a turn's model)."""
        ...
