"""What the run loop tells the one that runs it, declared: :class:`RunObserver`.

The loop (:func:`~retinue.engine.loop.run`) knows nothing of sessions, budgets or journals;
it reports to the observer of its :class:`~retinue.engine.config.RunConfig` (a
:class:`~retinue.engine.session.Session` is one): the usage of each model call as it comes
(so a turn that fails or is cancelled still counts what it spent), each step boundary (after
a model reply joins the history and after a step's tool results do: where a durable session
records its state, :mod:`retinue.durable`) and, before each model call, the steering that
arrived meanwhile. Events go to the context's sink and spans to
:mod:`retinue.telemetry.trace`, as before; an observer is what the layers above implement
instead of callbacks installed into the run's configuration.
"""

from __future__ import annotations

from typing import Protocol

from retinue.messages import Usage

__all__ = ["RunObserver"]


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
