"""Progress events: what every agent, model call, tool call and session is doing.

Each kind of event is a frozen dataclass with typed fields (:class:`TextDelta`,
:class:`ToolStarted`, :class:`SessionChanged`...), all subclasses of :class:`Event` (``kind``,
``agent_id``, ``at``); :data:`AgentEvent` is their union, so a type checker narrows on
``match event: case TextDelta(text=t, agent_id=a): ...``. ``agent_id`` is the agent's path
(``main``, ``main/researcher``, ``main/researcher/critic#2``): a sub-agent's events say
who it is. ``event.data`` is the old dict view (every field, and whatever else the emitter
added: :attr:`Event.extra`), kept for one release; ``event.to_dict()`` is the wire format
of SSE, A2A and MCP.

Events flow to an :data:`EventSink` (a plain callable) carried on the tool context, so a
sub-agent's events reach the same sink as its parent's. The CLI renders them as a live tree,
the HTTP service streams them over SSE, and a tracer can record them. A sink must be quick
and must not raise; :func:`emit` shields the run from a broken one. :func:`emit` builds the
class of its kind from keyword data; a kind this module does not know (a program's own)
arrives as a plain :class:`Event`.

Class names say what happened to what: ``<Thing><Past participle>`` (``RunStarted`` /
``RunFinished``, ``ModelCallStarted`` / ``ModelCallFinished``, ``ToolStarted`` /
``ToolFinished``, ``SessionChanged``...). The names ``ModelStarted``, ``ModelCalled`` and
``SessionEvent`` are deprecated aliases of ``ModelCallStarted``, ``ModelCallFinished`` and
``SessionChanged``, kept for one release (importing one warns); the wire kinds
(``model_started``, ``model_called``, ``session``) are unchanged.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeAlias, get_args

from retinue._deprecated import module_aliases, warn_renamed

__all__ = [
    "AgentEvent",
    "ApprovalAnswered",
    "ApprovalRequested",
    "Compressed",
    "Consolidated",
    "Event",
    "EventSink",
    "LimitReached",
    "ModelCallFinished",
    "ModelCallStarted",
    "Notice",
    "RunFinished",
    "RunStarted",
    "SessionAction",
    "SessionChanged",
    "TextDelta",
    "ToolFinished",
    "ToolStarted",
    "emit",
    "make_event",
]

log = logging.getLogger("retinue.events")

# The kinds (the ``kind`` of each class below, and of the wire format).
RUN_STARTED = "run_started"
RUN_FINISHED = "run_finished"
TEXT_DELTA = "text_delta"
MODEL_STARTED = "model_started"
MODEL_CALLED = "model_called"
TOOL_STARTED = "tool_started"
TOOL_FINISHED = "tool_finished"
SESSION = "session"
COMPRESSED = "compressed"
CONSOLIDATED = "consolidated"
NOTICE = "notice"
APPROVAL_REQUESTED = "approval_requested"
APPROVAL_ANSWERED = "approval_answered"
LIMIT_REACHED = "limit_reached"


def _no_data() -> dict[str, Any]:
    return {}


@dataclass(frozen=True, slots=True)
class Event:
    """One thing an agent did: ``kind``, the agent's path ``agent_id``, the time ``at``.

    The base of every typed event. A plain ``Event`` (``Event(kind, agent_id, data)``)
    stands for a kind without a class of its own; its ``data`` holds what it says. On a
    typed event ``data`` is the old dict view (the wire's keys but ``kind``, ``agent_id``
    and ``at``), kept for one release: read the typed fields instead.
    """

    kind: str
    agent_id: str
    data: dict[str, Any] = field(default_factory=_no_data)
    at: float = field(default_factory=time.time)
    _OLD_ID: ClassVar[str | None] = None

    @property
    def path(self) -> tuple[str, ...]:
        """``agent_id`` split at ``/``: ``("main", "researcher")`` for ``main/researcher``."""
        return tuple(self.agent_id.split("/"))

    @property
    def extra(self) -> dict[str, Any]:
        """What :attr:`data` holds beyond the class's own fields (and their old names)."""
        own = (*_OWN.get(type(self), ()), *self._old_keys())
        return {k: v for k, v in self.data.items() if k not in own}

    def _old_keys(self) -> dict[str, Any]:
        """The deprecated key the wire still carries for one release: :attr:`agent_id` under
        the name the class gave it before (``_OLD_ID``), if any."""
        return {self._OLD_ID: self.agent_id} if self._OLD_ID else {}

    def to_dict(self) -> dict[str, Any]:
        """The wire format (SSE, A2A, MCP): ``kind``, ``agent_id``, ``at`` and the data."""
        return {"kind": self.kind, "agent_id": self.agent_id, "at": self.at, **self.data}


@dataclass(frozen=True, slots=True, kw_only=True)
class _Typed(Event):
    """An event of a kind with fields of its own; ``data`` is built from them."""

    data: dict[str, Any] = field(default_factory=_no_data, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:  # (make_event then sets the dict it was given)
        own = _OWN.get(type(self), ())
        object.__setattr__(self, "data", {**self._old_keys(), **{k: getattr(self, k) for k in own}})


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStarted(_Typed):
    """An agent's run began: its ``role``, its parent's id and its nesting ``depth``."""

    kind: Literal["run_started"] = field(default="run_started", init=False)
    role: str
    parent_id: str | None = None
    depth: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFinished(_Typed):
    """An agent's run ended: why (``stop_reason``, ``cancelled`` too), its token ``usage``
    (``input_tokens``, ``output_tokens``, ``requests``); a typed answer's ``role`` and
    ``output`` (as JSON data)."""

    kind: Literal["run_finished"] = field(default="run_finished", init=False)
    stop_reason: str
    usage: dict[str, int] = field(default_factory=dict[str, int])
    role: str | None = None
    output: Any = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDelta(_Typed):
    """A piece of an answer as the model writes it (streaming runs; sub-agents' too)."""

    kind: Literal["text_delta"] = field(default="text_delta", init=False)
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelCallStarted(_Typed):
    """A model call began (wire kind ``model_started``; ``ModelStarted`` is its deprecated
    name)."""

    kind: Literal["model_started"] = field(default="model_started", init=False)
    model: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelCallFinished(_Typed):
    """A model call ended: its tokens, ``seconds`` and ``cost_usd`` (``None``: unknown
    price); ``purpose`` for a call that is not the agent's own step (``compress``);
    ``model`` and ``fallback_from`` when a fallback model answered. Wire kind
    ``model_called``; ``ModelCalled`` is its deprecated name."""

    kind: Literal["model_called"] = field(default="model_called", init=False)
    input_tokens: int
    output_tokens: int
    seconds: float | None = None
    cost_usd: float | None = None
    purpose: str | None = None
    model: str | None = None
    fallback_from: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolStarted(_Typed):
    """A tool call began; ``arguments`` is the JSON text the model wrote."""

    kind: Literal["tool_started"] = field(default="tool_started", init=False)
    call_id: str
    name: str
    arguments: str = "{}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolFinished(_Typed):
    """A tool call ended; ``preview`` is the start of its result."""

    kind: Literal["tool_finished"] = field(default="tool_finished", init=False)
    call_id: str
    name: str
    is_error: bool = False
    preview: str = ""


SessionAction: TypeAlias = Literal[
    "created", "paused", "unloaded", "interrupted", "asking", "answered", "steered"
]
"""What happened to an interactive session (a :class:`SessionChanged`)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionChanged(_Typed):
    """An interactive session was created, paused, unloaded, interrupted, steered, or asks
    its parent (``question``) and got its answer; the session is the event's ``agent_id``.
    ``created`` says the ``parent_id`` and ``role``; ``paused``, ``interrupted`` and
    ``unloaded`` the ``turns`` so far; ``unloaded`` what became of its memory
    (``consolidation``: ``done``, ``failed``, ``none``). Wire kind ``session``;
    ``SessionEvent`` is its deprecated name. The wire (and :attr:`data`) still carries the
    session's id as ``conversation_id`` too, for one release."""

    kind: Literal["session"] = field(default="session", init=False)
    action: SessionAction
    parent_id: str | None = None
    role: str | None = None
    turns: int | None = None
    consolidation: str | None = None
    question: str | None = None

    _OLD_ID: ClassVar[str | None] = "conversation_id"

    @property
    def conversation_id(self) -> str:
        """Deprecated: the session's id is :attr:`agent_id`."""
        warn_renamed("SessionChanged.conversation_id", "agent_id")
        return self.agent_id


@dataclass(frozen=True, slots=True, kw_only=True)
class Compressed(_Typed):
    """The conversation was compressed (AutoCompress: a summary, or ``reason``
    ``context_edit``: old tool results and reasoning cleared), or failed to be (``ok``
    false, with the ``error``); ``hard`` when the model had refused a too long context."""

    kind: Literal["compressed"] = field(default="compressed", init=False)
    before_tokens: int
    after_tokens: int
    removed_messages: int = 0
    trimmed_results: int = 0
    cleared_reasoning: int = 0
    reason: str = ""
    hard: bool = False
    ok: bool = True
    error: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Consolidated(_Typed):
    """A session's memory was consolidated (``ok``), or the attempt failed (``error``); the
    session is the event's ``agent_id``. The wire (and :attr:`data`) still carries it as
    ``session_id`` too, for one release."""

    kind: Literal["consolidated"] = field(default="consolidated", init=False)
    role: str
    ok: bool = True
    error: str | None = None

    _OLD_ID: ClassVar[str | None] = "session_id"

    @property
    def session_id(self) -> str:
        """Deprecated: the session's id is :attr:`agent_id`."""
        warn_renamed("Consolidated.session_id", "agent_id")
        return self.agent_id


@dataclass(frozen=True, slots=True, kw_only=True)
class Notice(_Typed):
    """Something the user should know once (a model fallback, a skipped hook...)."""

    kind: Literal["notice"] = field(default="notice", init=False)
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalRequested(_Typed):
    """A call waits for a person's yes or no (the fields of an
    :class:`~retinue.policy.approvals.ApprovalRequest`; the agent is the event's)."""

    kind: Literal["approval_requested"] = field(default="approval_requested", init=False)
    id: str
    role: str
    depth: int
    tool: str
    arguments: str
    reason: str
    rule: str = ""
    call_id: str = ""
    digest: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalAnswered(_Typed):
    """The request ``id`` was answered (``allow``, ``always``) or withdrawn (``cancelled``)."""

    kind: Literal["approval_answered"] = field(default="approval_answered", init=False)
    id: str
    allow: bool
    always: bool = False
    cancelled: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class LimitReached(_Typed):
    """A fan-out cap refused a sub-agent (:mod:`retinue.subagents.caps`): which ``limit``
    (``subagents_per_run``, ``concurrent_subagents``, ``depth``, ``repeated_delegation``...)
    at what ``value``, for which ``role``, what the model read (``reason``), and whether
    the turn that asked ends (``stopped``)."""

    kind: Literal["limit_reached"] = field(default="limit_reached", init=False)
    limit: str
    value: int
    role: str = ""
    reason: str = ""
    stopped: bool = False


AgentEvent: TypeAlias = (
    RunStarted
    | RunFinished
    | TextDelta
    | ModelCallStarted
    | ModelCallFinished
    | ToolStarted
    | ToolFinished
    | SessionChanged
    | Compressed
    | Consolidated
    | Notice
    | ApprovalRequested
    | ApprovalAnswered
    | LimitReached
)
"""Every event Retinue emits: ``match`` on the classes, or compare ``event.kind``."""

EVENT_CLASSES: tuple[type[_Typed], ...] = get_args(AgentEvent)
"""The classes of :data:`AgentEvent`, in its order."""
_BASE = frozenset(f.name for f in fields(Event))
_OWN: dict[type[Event], tuple[str, ...]] = {
    c: tuple(f.name for f in fields(c) if f.name not in _BASE) for c in EVENT_CLASSES
}
_BY_KIND: dict[str, type[_Typed]] = {
    str(next(f.default for f in fields(c) if f.name == "kind")): c for c in EVENT_CLASSES
}

EventSink = Callable[[Event], None]


def make_event(kind: str, agent_id: str, data: Mapping[str, Any]) -> Event:
    """The event of ``kind`` (its class, when it has one) saying ``data``. ``data`` stays
    the event's dict view as given, keys the class does not know included; data that does
    not fit the class (a field missing) makes a plain :class:`Event`."""
    cls, given = _BY_KIND.get(kind), dict(data)
    if cls is None:
        return Event(kind, agent_id, given)
    try:
        event = cls(agent_id, **{k: given[k] for k in _OWN[cls] if k in given})
    except TypeError:
        log.warning("%s event of %s lacks a field: %s", kind, agent_id, sorted(given))
        return Event(kind, agent_id, given)
    object.__setattr__(event, "data", {**event._old_keys(), **given})
    return event


def emit(sink: EventSink | None, kind: str, agent_id: str, **data: Any) -> None:
    """Deliver one event to ``sink`` if there is one; a failing sink is logged, not raised."""
    if sink is None:
        return
    try:
        sink(make_event(kind, agent_id, data))
    except Exception:
        log.exception("event sink failed on %s", kind)


_RENAMED = {
    "ModelStarted": "ModelCallStarted",
    "ModelCalled": "ModelCallFinished",
    "SessionEvent": "SessionChanged",
}
if TYPE_CHECKING:  # the deprecated names, for type checkers (at run time they warn)
    ModelStarted = ModelCallStarted
    ModelCalled = ModelCallFinished
    SessionEvent = SessionChanged
else:
    __getattr__ = module_aliases(__name__, _RENAMED)
