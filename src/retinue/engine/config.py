"""What configures a run (:class:`RunConfig`), what it works on (:class:`RunState`) and what
it gives back (:class:`RunOutput`).

A run is :func:`~retinue.engine.loop.run_turn` ``(config, state)``: the configuration is
what stays the same from turn to turn (the model, the tools, who calls them, the limits), the
state is what the turn changes (the history, which it extends in place). A session keeps one
of each (:class:`~retinue.engine.session.Session`: ``config`` and ``run_state``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol

from typing_extensions import TypeVar

from retinue.engine.observer import RunObserver
from retinue.engine.repeats import REPEAT_LIMIT
from retinue.llm.base import Model
from retinue.messages import Message, Usage
from retinue.tools.base import ToolContext, ToolRegistry

if TYPE_CHECKING:
    from retinue.engine.output import OutputSpec, SubAgentOutput
    from retinue.engine.pause import Paused

__all__ = ["ContextKeeper", "OutputT", "RunConfig", "RunOutput", "RunState", "StopReason"]

OutputT = TypeVar("OutputT", default=Any)
"""The type of :attr:`RunOutput.output`: the output type's (the answer's text without one)."""
T = TypeVar("T")
_NO_OUTPUT: Any = None  # RunOutput.output's default, whatever OutputT is

StopReason = Literal[
    "final",
    "waiting_for_input",
    "max_iterations",
    "repeated_call",
    "interrupted",
    "asking",
    "refused",
]
"""Why a run ended: an answer (``final``), a pause for the next message
(``waiting_for_input``) or on a question (``asking``), an interruption, or no answer: the limit
of model calls (``max_iterations``), the same tool call repeated after a warning
(``repeated_call``, see :mod:`retinue.engine.repeats`) or a model call or answer a guard
refused (``refused``, see :mod:`retinue.policy.guards`); :attr:`RunOutput.stopped` is true for
these three."""


class ContextKeeper(Protocol):
    """Keeps a conversation inside the model's context window (see ``engine.compress``).

    Both methods edit ``messages`` in place, so a session's stored history is the compressed
    one.
    """

    async def before_call(
        self, messages: list[Message], model: Model, ctx: ToolContext, last_input_tokens: int
    ) -> None:
        """Called before every model call with the provider's last prompt-token figure."""
        ...

    async def on_context_too_long(
        self, messages: list[Message], model: Model, ctx: ToolContext
    ) -> bool:
        """The provider said the request is too long: compress harder; True if it did."""
        ...


@dataclass(slots=True)
class RunState:
    """What a run works on and changes: ``messages``, the conversation so far, system prompt
    first. The run *extends this list in place* (model replies, tool results, a closing
    note), so a session hands in its state and keeps it for the next turn; the calls of its
    last step that have no result yet are :func:`~retinue.engine.pause.open_calls` of it.
    What a turn used and where it stopped (usage, iterations, the tools used, what a paused
    turn waits on) come back in its :class:`RunOutput`."""

    messages: list[Message] = field(default_factory=list)


@dataclass(slots=True, init=False)
class RunConfig:
    """What configures a run of one agent; the history it works on is its :class:`RunState`.

    The ``model``, its ``tools`` and ``context`` (who calls them), the limits
    (``max_iterations``; ``repeat_limit``: identical steps in a row after which the model is
    warned, one more ending the run, :mod:`retinue.engine.repeats`; ``None`` never stops a
    repeated call), ``interactive`` (an answer without tool calls is a pause,
    ``waiting_for_input``, not an end), ``stream``, the ``context_keeper`` and ``output``
    (:mod:`retinue.engine.output`: the model gets a ``final_result`` tool and its answer is a
    validated, typed value).

    ``observer`` (:class:`~retinue.engine.observer.RunObserver`, a session's) hears the run
    as it goes: each model call's usage, each step boundary, and the steering to show the
    model before its next call.

    Compatibility (one release): ``messages``, the second argument, is the history of a run
    given no state (``run_turn(config)`` runs on ``RunState(config.messages)``, and a
    :class:`~retinue.engine.session.Session` made without one starts from it); a config made
    without it has an empty one. ``on_usage``, ``steering`` and ``on_step`` are deprecated:
    given when the config is made, they become its observer.
    """

    model: Model
    tools: ToolRegistry
    context: ToolContext
    max_iterations: int
    interactive: bool
    stream: bool
    context_keeper: ContextKeeper | None
    on_usage: Callable[[Usage], None] | None
    steering: Callable[[], list[str]] | None
    on_step: Callable[[], Awaitable[None]] | None
    output: OutputSpec[Any] | None
    repeat_limit: int | None
    observer: RunObserver | None
    history: list[Message] | None = field(init=False, repr=False, compare=False)
    """The history given as ``messages`` (compatibility), else None."""

    def __init__(  # (the order of the fields before the split: positional calls still work)
        self,
        model: Model,
        messages: list[Message] | None = None,
        tools: ToolRegistry | None = None,
        context: ToolContext | None = None,
        max_iterations: int = 50,
        interactive: bool = False,
        stream: bool = False,
        context_keeper: ContextKeeper | None = None,
        on_usage: Callable[[Usage], None] | None = None,
        steering: Callable[[], list[str]] | None = None,
        on_step: Callable[[], Awaitable[None]] | None = None,
        output: OutputSpec[Any] | None = None,
        repeat_limit: int | None = REPEAT_LIMIT,
        observer: RunObserver | None = None,
    ) -> None:
        if tools is None or context is None:
            raise TypeError("RunConfig needs its tools and context")
        self.model, self.tools, self.context = model, tools, context
        self.max_iterations, self.interactive, self.stream = max_iterations, interactive, stream
        self.context_keeper, self.output, self.repeat_limit = context_keeper, output, repeat_limit
        self.on_usage, self.steering, self.on_step = on_usage, steering, on_step
        self.observer = observer
        self.history = messages
        if on_usage or steering or on_step:  # (deprecated: see the docstring)
            self.observer = _Callbacks(on_usage, steering, on_step)

    @property
    def messages(self) -> list[Message]:
        """The history of a run given no state (compatibility: see the class docstring)."""
        if self.history is None:
            self.history = []
        return self.history

    @messages.setter
    def messages(self, value: list[Message]) -> None:
        self.history = value


@dataclass(frozen=True, slots=True)
class _Callbacks:
    """The deprecated callbacks of a :class:`RunConfig` as its observer."""

    on_usage: Callable[[Usage], None] | None
    take: Callable[[], list[str]] | None
    on_step: Callable[[], Awaitable[None]] | None

    @property
    def records(self) -> bool:
        return self.on_step is not None

    def used(self, usage: Usage) -> None:
        if self.on_usage is not None:
            self.on_usage(usage)

    def steering(self) -> list[str]:
        return self.take() if self.take is not None else []

    async def step(self) -> None:
        if self.on_step is not None:
            await self.on_step()


@dataclass(slots=True)
class RunOutput(Generic[OutputT]):
    """What a run gave back: ``content`` (the answer's text; with an output type, its JSON)
    and ``output`` (the typed answer: the validated object, or the text when there is no
    output type; ``None`` when the run ended without an answer). ``subagent_outputs`` are
    the typed answers of the sub-agents whose roles have an output type, in the order they
    came (:class:`~retinue.Agent` fills it; :meth:`outputs` picks them by type)."""

    content: str
    messages: list[Message]
    stop_reason: StopReason
    tools_used: list[str] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    iterations: int = 0
    last_input_tokens: int = 0
    output: OutputT = _NO_OUTPUT
    subagent_outputs: list[SubAgentOutput] = field(default_factory=list)
    paused: Paused | None = None
    """What the turn waits on when it ended paused (``asking``: the question and its call;
    see :mod:`retinue.engine.pause`), else None."""

    def outputs(self, kind: type[T]) -> list[T]:
        """The sub-agents' typed answers that are ``kind`` objects, in order."""
        return [s.output for s in self.subagent_outputs if isinstance(s.output, kind)]

    @property
    def waiting_for_input(self) -> bool:
        return self.stop_reason == "waiting_for_input"

    @property
    def stopped(self) -> bool:
        """The run ended without an answer (``max_iterations``, ``repeated_call`` or
        ``refused``): its ``content`` is a "Stopped: …" note."""
        return self.stop_reason in ("max_iterations", "repeated_call", "refused")

    @property
    def asking(self) -> bool:
        """The turn is paused on a question (``content``); the next message answers it."""
        return self.stop_reason == "asking"

    def tail(self, since: int) -> Sequence[Message]:
        """The messages this run appended after the first ``since``."""
        return self.messages[since:]
