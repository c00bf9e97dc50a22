"""Guards: the program's own checks, in Python, at four points of every run at every depth.

A :class:`Guard` holds up to four callbacks (sync or async): ``before_model`` (given a
:class:`ModelRequest`, before each model call), ``before_tool`` (a :class:`ToolRequest`,
before a tool call), ``after_tool`` (a :class:`ToolResponse`, before the model reads a
result) and ``on_answer`` (a :class:`FinalAnswer`, before a run's answer is given back). Each
returns ``None`` (no objection) or a :class:`Verdict`: ``Verdict.deny(reason)``,
``Verdict.ask(reason)`` (a person must approve, through the same approver as every other
approval; with nobody to answer it is refused) or ``Verdict.rewrite(value)`` (the messages
sent, the call's arguments, the result's text or the answer's text, in place of the
original). Guards run in the order given, each seeing the value the one before left, before
the settings' hooks and rules (:class:`~retinue.policy.gate.Policy` carries them down to
every sub-agent); the first deny ends the check, and every ask is put in one question at the
end. A guard that raises counts as a deny naming the guard and the exception: the run goes
on, the call does not run. ``before_model`` sees the agents' own model calls (the run loop's),
not the one-call helpers that read a conversation (memory consolidation, compression).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeAlias, cast

from typing_extensions import TypeVar

from retinue.errors import ToolError
from retinue.messages import Message

if TYPE_CHECKING:
    from retinue.tools.base import Tool, ToolContext

__all__ = [
    "FinalAnswer",
    "Guard",
    "GuardAnswer",
    "ModelRequest",
    "Screened",
    "ToolRequest",
    "ToolResponse",
    "Verdict",
    "needs_approval",
    "screen",
]

T = TypeVar("T", default=Any)
R = TypeVar("R")
MAX_REASON = 500  # characters of a guard's reason or exception shown to a model or a person


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """A model call about to be made: the ``messages`` it sends, by the agent ``ctx`` names."""

    messages: Sequence[Message]
    model: str
    ctx: ToolContext


@dataclass(frozen=True, slots=True)
class ToolRequest:
    """A tool call about to run: its ``arguments`` as the model sent them (or as a guard
    before this one rewrote them)."""

    tool: str
    arguments: dict[str, Any]
    ctx: ToolContext
    call_id: str = ""


@dataclass(frozen=True, slots=True)
class ToolResponse:
    """A tool call's result, before the model reads it (``content`` is its text)."""

    tool: str
    arguments: dict[str, Any]
    content: str
    is_error: bool
    ctx: ToolContext


@dataclass(frozen=True, slots=True)
class FinalAnswer:
    """A run's answer before it is given back (to the caller, or to a parent agent);
    ``content`` is its text (with an output type, its JSON; ``output`` the typed value)."""

    content: str
    ctx: ToolContext
    output: Any = None


@dataclass(frozen=True, slots=True)
class Verdict(Generic[T]):
    """What a guard says; build it with :meth:`allow`, :meth:`deny`, :meth:`ask` or
    :meth:`rewrite`. ``None`` from a guard means the same as :meth:`allow`."""

    action: Literal["allow", "deny", "ask", "rewrite"]
    reason: str = ""
    value: T | None = None

    @classmethod
    def allow(cls) -> Verdict[Any]:
        return Verdict("allow")

    @classmethod
    def deny(cls, reason: str) -> Verdict[Any]:
        """Refuse: the call does not run (the model reads ``reason``), the model is not called
        or the answer is withheld (the run ends with ``stop_reason="refused"``)."""
        return Verdict("deny", reason)

    @classmethod
    def ask(cls, reason: str) -> Verdict[Any]:
        """Go on only if a person approves (the approver is shown ``reason``)."""
        return Verdict("ask", reason)

    @classmethod
    def rewrite(cls, value: R, reason: str = "") -> Verdict[R]:
        """Go on with ``value`` in place of what the guard was shown."""
        return Verdict("rewrite", reason, value)


GuardAnswer: TypeAlias = "Verdict[T] | Awaitable[Verdict[T] | None] | None"
"""What a guard callback returns: a :class:`Verdict`, ``None``, or an awaitable of either."""


@dataclass(frozen=True, slots=True)
class Guard:
    """The program's checks, each optional (see the module text). ``name`` names the guard in
    refusals and errors (default: the callback's name)."""

    before_model: Callable[[ModelRequest], GuardAnswer[Sequence[Message]]] | None = None
    before_tool: Callable[[ToolRequest], GuardAnswer[dict[str, Any]]] | None = None
    after_tool: Callable[[ToolResponse], GuardAnswer[str]] | None = None
    on_answer: Callable[[FinalAnswer], GuardAnswer[str]] | None = None
    name: str = ""


@dataclass(frozen=True, slots=True)
class Screened(Generic[T]):
    """What the guards let through: ``value`` (as given or rewritten), or ``refused`` (why
    not); ``asks`` are the reasons a person must approve it for."""

    value: T
    refused: str = ""
    asks: tuple[str, ...] = field(default=())


async def screen(
    checks: Sequence[tuple[str, Callable[[R], GuardAnswer[T]] | None]],
    value: T,
    request: Callable[[T], R],
    kind: type | tuple[type, ...],
) -> Screened[T]:
    """Run ``checks`` (``(name, callback)``; a ``None`` callback is skipped) in order, each on
    ``request(value)`` of the value so far; a rewrite must be a ``kind``."""
    asks: list[str] = []
    for name, check in checks:
        if check is None:
            continue
        label = f"guard {name!r}" if name else "a guard"
        try:
            verdict = check(request(value))
            if inspect.isawaitable(verdict):
                verdict = await verdict
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return Screened(value, _clip(f"{label} failed: {type(exc).__name__}: {exc}"))
        if verdict is None or verdict.action == "allow":
            continue
        if verdict.action == "deny":
            return Screened(value, _clip(verdict.reason or f"{label} refused it"))
        if verdict.action == "ask":
            asks.append(_clip(verdict.reason or f"{label} asks for approval"))
        elif not isinstance(verdict.value, kind):
            got = type(verdict.value).__name__
            return Screened(value, f"{label} rewrote it as a {got}, which is not allowed here")
        else:
            value = cast("T", verdict.value)
    return Screened(value, asks=tuple(asks))


def named(guards: Sequence[Guard], point: str) -> list[tuple[str, Any]]:
    """``(name, callback)`` of each guard that checks ``point`` (an attribute of Guard)."""
    found: list[tuple[str, Any]] = []
    for g in guards:
        check = {"before_model": g.before_model, "before_tool": g.before_tool,
                 "after_tool": g.after_tool, "on_answer": g.on_answer}[point]  # fmt: skip
        if check is not None:
            found.append((g.name or getattr(check, "__name__", ""), check))
    return found


async def needs_approval(tool: Tool | None, args: Mapping[str, Any], ctx: ToolContext) -> bool:
    """Whether a call of ``tool`` must be approved by a person (``@tool(needs_approval=...)``;
    a callable is given the call's context and arguments). A check that raises:
    :class:`~retinue.errors.ToolError` naming it (the call does not run)."""
    wanted = False if tool is None else tool.needs_approval
    if not callable(wanted):
        return bool(wanted)
    try:
        answer = wanted(ctx, dict(args))
        if inspect.isawaitable(answer):
            answer = await answer
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        text = _clip(f"{type(exc).__name__}: {exc}")
        name = tool.name if tool else "?"
        raise ToolError(f"the needs_approval check of {name} failed: {text}") from None
    return bool(answer)


def _clip(text: str) -> str:
    return text if len(text) <= MAX_REASON else text[:MAX_REASON] + "…"
