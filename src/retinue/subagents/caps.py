"""Fan-out caps and the delegation loop detector: how many sub-agent sessions may start.

A model that delegates without end (hundreds of sub-agents in a minute, the same task again
and again) is refused before a session starts. The counts belong to a conversation's tree
(its main agent's id, per tenant): sessions started during one turn of the main agent (one
``retinue run``, one chat or HTTP message; ``max_subagents_per_run``, default 50), during
the whole conversation (``max_subagents_per_conversation``, 500) and open at once, held
interactive ones included (``max_concurrent_subagents``, 20); nesting depth stays the
manager's (``max_depth``, 3). A parent that delegates the same task to the same role
``repeat_limit`` times in a row (the run's setting, counted by
:class:`~retinue.engine.repeats.Repeats`; other tool calls in between do not break the row)
gets a note instead of a new run, and its turn stops if it delegates it once more
(:func:`~retinue.engine.repeats.stop_turn`, ``stop_reason="repeated_call"``); so does an
agent refused by a cap ``repeat_limit`` times in one run. Each limit reached is the tool
result the model reads, a ``limit_reached`` event (:class:`~retinue.events.LimitReached`;
the CLI prints it as a line), and ``retinue.limit.*`` attributes on the ``SubAgent`` call's
span.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from retinue.engine.repeats import REPEAT_LIMIT, Repeats, stop_turn
from retinue.engine.session import Session, current_session
from retinue.errors import SubAgentError
from retinue.events import LIMIT_REACHED, emit
from retinue.messages import ToolCall, ToolResultMessage
from retinue.subagents.messaging import messenger_of
from retinue.subagents.registry import SessionRegistry
from retinue.telemetry import trace as _tel
from retinue.tools.base import ToolContext

__all__ = [
    "LIMIT_REACHED",
    "FanOut",
    "FanOutLimits",
    "delegations_detector",
    "over_cap",
    "repeated_delegation",
]

_SETTING = {
    "subagents_per_run": "max_subagents_per_run",
    "subagents_per_conversation": "max_subagents_per_conversation",
    "concurrent_subagents": "max_concurrent_subagents",
    "depth": "max_depth",
}
_ROLE_CHARS = 64  # of a role name quoted in a note (the model wrote it)
_DO_IT = "do the rest yourself or answer with what you have"
_SAME = [ToolResultMessage("", "SubAgent", "", False)]  # a delegation's answer is not compared


@dataclass(frozen=True, slots=True)
class FanOutLimits:
    """The caps of one manager (0: none); see the module docstring."""

    per_run: int = 50
    per_conversation: int = 500
    concurrent: int = 20


@dataclass(eq=False, slots=True)
class _Tree:
    """The counts of one conversation's tree."""

    root: Session | None = None  # its main agent's session, when it runs as one
    turn: int = -1  # that session's turn the run counts are of
    run: int = 0  # sessions started in this run (the main agent's turn)
    total: int = 0  # ... in this conversation
    open: int = 0  # sessions open now
    refused: dict[str, int] = field(default_factory=dict)  # in this run, per parent agent id
    loops: dict[str, Repeats] = field(default_factory=dict)  # per parent agent id

    def roll(self, session: Session) -> None:
        """The main agent's ``session`` delegates: a new run (or conversation) resets."""
        if session is not self.root:
            self.root, self.total = session, 0
        elif session.turns == self.turn:
            return
        self.turn = session.turns
        self.new_run()

    def new_run(self) -> None:
        self.run = 0
        self.refused.clear()
        self.loops.clear()


def over_cap(
    limits: FanOutLimits, role: str, *, open_now: int, run: int, total: int
) -> tuple[str, int, str] | None:
    """The first cap that starting a session of ``role`` would pass, with ``open_now``
    sessions open in the conversation's tree and ``run`` and ``total`` started in its main
    agent's run and in the conversation: ``(its limit, its value, the line the model
    reads)``; None: it may start. (The counts are a manager's, or a conversation workflow's
    on Temporal.)"""
    checks = (  # (limit, its value, the count now, what has reached it, what to do)
        ("concurrent_subagents", limits.concurrent, open_now,
         "{n} sub-agent sessions are open in this conversation",
         "end one with UnloadSubAgent, wait for one to finish, or do the work yourself"),
        ("subagents_per_run", limits.per_run, run,
         "this run has started {n} sub-agent sessions", _DO_IT),
        ("subagents_per_conversation", limits.per_conversation, total,
         "this conversation has started {n} sub-agent sessions", _DO_IT),
    )  # fmt: skip
    for limit, value, count, reached, then in checks:
        if value and count >= value:
            reason = (
                f"cannot start {role[:_ROLE_CHARS]!r}: {reached.format(n=count)}, the limit "
                f"({_SETTING[limit]}={value}); {then}"
            )
            return limit, value, reason
    return None


def delegations_detector(limit: int) -> Repeats:
    """The loop detector of one parent's delegations (:func:`repeated_delegation`)."""
    return Repeats(max(limit - 1, 1))


def repeated_delegation(
    seen: Repeats, limit: int, role: str, instance: str | None, task: str, interactive: bool
) -> tuple[str, bool] | None:
    """Count one delegation of ``task`` to ``role`` in ``seen`` (a parent's
    :func:`delegations_detector`): None when it may run; else what the parent reads instead
    and whether its turn stops (``limit`` times in a row: a note; once more: a stop). The
    in-process manager's rule, and the conversation workflow's on Temporal."""
    key = json.dumps([role, instance or "", interactive, task])
    call = (ToolCall("", "SubAgent", key),)
    warned = seen.refused(call)  # the limit-th time in a row (or later)
    seen.observe(call, _SAME)
    if not warned:
        return None
    times, name = seen.times, role[:_ROLE_CHARS]
    if times <= limit:
        return (
            f"Not run: you delegated this same task to {name!r} {times} times in a row "
            "(this call included); its answers are above. Use them, change the task, or "
            "answer. Delegating it once more stops your turn.",
            False,
        )
    return (
        f"Stopped: the agent delegated the same task to {name!r} {times} times in a row and "
        "went on after being told (stop_reason=repeated_call).",
        True,
    )


class FanOut:
    """The caps and loop detector of one :class:`~retinue.subagents.manager.SubAgentManager`."""

    def __init__(self, limits: FanOutLimits, registry: SessionRegistry) -> None:
        self.limits = limits
        self.registry = registry
        self._trees: dict[str, dict[str, _Tree]] = {}  # by main agent id, then tenant
        self._count = 0  # trees in _trees
        self._open: dict[str, _Tree] = {}  # open session's agent id -> its tree
        self._prune_at = 256

    def open_in(self, ctx: ToolContext) -> int:
        """Sessions open now in the tree ``ctx``'s agent belongs to."""
        return self._tree(ctx).open

    # -- the loop detector -----------------------------------------------------------

    def repeated(
        self, ctx: ToolContext, role: str, instance: str | None, task: str, interactive: bool
    ) -> str | None:
        """What the parent reads instead of a delegation it repeats (None: it runs)."""
        session = current_session()
        limit = session.config.repeat_limit if session is not None else REPEAT_LIMIT
        if limit is None:
            return None
        loops = self._tree(ctx).loops
        seen = loops.get(ctx.agent_id)
        if seen is None:
            seen = loops[ctx.agent_id] = delegations_detector(limit)
        found = repeated_delegation(seen, limit, role, instance, task, interactive)
        if found is None:
            return None
        note, stops = found
        asked = stop_turn(note) if stops else False
        self._report(ctx, "repeated_delegation", limit, role, note, stopped=asked)
        return "Not run: the same task was delegated again; your turn stops." if stops else note

    # -- the caps --------------------------------------------------------------------

    def admit(self, ctx: ToolContext, role: str) -> None:
        """Count a session ``ctx``'s agent starts, or refuse it (:class:`SubAgentError`)."""
        tree = self._tree(ctx)
        over = over_cap(self.limits, role, open_now=tree.open, run=tree.run, total=tree.total)
        if over is not None:
            raise self._refuse(ctx, tree, *over, role)
        tree.run += 1
        tree.total += 1

    def refuse_depth(self, ctx: ToolContext, role: str, limit: int, reason: str) -> SubAgentError:
        """The error for a session past ``max_depth``, reported as the caps are."""
        return self._refuse(ctx, self._tree(ctx), "depth", limit, reason, role)

    def run_ended(self, agent_id: str) -> None:
        """``agent_id``'s run ended (its sessions were cleaned up): if it is a main agent,
        its next run counts from nothing (with or without a session of its own)."""
        for tree in self._trees.get(agent_id, {}).values():
            tree.new_run()

    def opened(self, agent_id: str, ctx: ToolContext) -> None:
        """Session ``agent_id`` (of context ``ctx``) is open, until :meth:`closed`."""
        root = messenger_of(self.registry).root_of(ctx.parent_id or agent_id)
        tree = self._trees.get(root, {}).get(ctx.tenant)
        if tree is None:  # (not admitted here: a session rebuilt from its record)
            return
        tree.open += 1
        self._open[agent_id] = tree

    def closed(self, agent_id: str) -> None:
        tree = self._open.pop(agent_id, None)
        if tree is not None:
            tree.open -= 1
            tree.loops.pop(agent_id, None)
            tree.refused.pop(agent_id, None)

    # -- inside ----------------------------------------------------------------------

    def _tree(self, ctx: ToolContext) -> _Tree:
        root = messenger_of(self.registry).root_of(ctx.agent_id)
        tenants = self._trees.get(root)
        tree = tenants.get(ctx.tenant) if tenants is not None else None
        if tree is None:
            self._prune()
            tree = self._trees.setdefault(root, {})[ctx.tenant] = _Tree()
            self._count += 1
        session = current_session()
        if ctx.depth == 0 and session is not None and session.id == ctx.agent_id:
            tree.roll(session)
        return tree

    def _prune(self) -> None:
        """Forget the trees with nothing open whose conversation ended, as they grow."""
        if self._count < self._prune_at:
            return
        kept = {
            root: {k: t for k, t in tenants.items() if t.open or _live(t.root)}
            for root, tenants in self._trees.items()
        }
        self._trees = {root: tenants for root, tenants in kept.items() if tenants}
        self._count = sum(len(tenants) for tenants in self._trees.values())
        self._prune_at = max(256, 2 * self._count)

    def _refuse(
        self, ctx: ToolContext, tree: _Tree, limit: str, value: int, reason: str, role: str
    ) -> SubAgentError:
        session = current_session()
        most = session.config.repeat_limit if session is not None else REPEAT_LIMIT
        times = tree.refused[ctx.agent_id] = tree.refused.get(ctx.agent_id, 0) + 1
        stopped = most is not None and times >= most
        if stopped:
            setting = _SETTING[limit]
            stopped = stop_turn(
                f"Stopped: the agent kept starting sub-agents after reaching the limit "
                f"{setting}={value} (stop_reason=repeated_call)."
            )
            reason += "; your turn stops here"
        elif most is not None:
            reason += "; delegating again after this may stop your turn"
        self._report(ctx, limit, value, role, reason, stopped=stopped)
        return SubAgentError(reason)

    @staticmethod
    def _report(
        ctx: ToolContext, limit: str, value: int, role: str, reason: str, *, stopped: bool
    ) -> None:
        """The event and the span's attributes of a limit reached."""
        emit(ctx.events, LIMIT_REACHED, ctx.agent_id, limit=limit, value=value,
             role=role[:_ROLE_CHARS], reason=reason, stopped=stopped)  # fmt: skip
        if _tel.ENABLED:
            _tel.annotate(
                **{
                    "retinue.limit.name": limit,
                    "retinue.limit.value": value,
                    "retinue.limit.stopped": stopped,
                }
            )


def _live(session: Session | None) -> bool:
    return session is not None and session.state != "closed"
