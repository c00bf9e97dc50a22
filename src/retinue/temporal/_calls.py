"""The calls a conversation workflow answers itself, read without I/O: ``SubAgent`` (a
child workflow), ``UnloadSubAgent`` and ``AskParent``. Their arguments come from a model,
so they are checked here (types, names, sizes) before any workflow starts; what a call may
not do on Temporal is refused with a tool result that says so. Also the results the
workflow gives a call whose activity did not finish (cut short, timed out).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from retinue.durable.revive import RESTARTED_RESULT
from retinue.messages import ToolCall, ToolResultMessage, to_dict
from retinue.saved import valid_conversation_id
from retinue.temporal._types import Json

__all__ = [
    "Delegation",
    "cut_short",
    "cut_to_payload",
    "error_result",
    "read_delegation",
    "read_question",
    "read_unload",
    "timed_out",
    "tool_result",
    "unfit_text",
]

NOT_YET = ("background", "fork", "files")  # SubAgent options the workflow lacks


@dataclass(frozen=True, slots=True)
class Delegation:
    task: str
    role: str
    interactive: bool
    instance: str | None
    steer: bool = False  # for the session's running turn, if it works (an interactive one)

    @property
    def address(self) -> str:
        """How the model names an interactive session: ``role[:instance]``."""
        return self.role + (f":{self.instance}" if self.instance else "")


def tool_result(call: ToolCall, content: str, *, error: bool = False) -> Json:
    return to_dict(ToolResultMessage(call.id, call.name, content, error))


def error_result(call: ToolCall, text: str) -> Json:
    return tool_result(call, f"Error: {text}", error=True)


def cut_short(call: ToolCall) -> Json:
    """The result of a call that is not idempotent and whose worker died (or was stopped)
    while it ran: it is not run again, and the model is told it may have run, as a restarted
    durable session tells it."""
    return tool_result(call, RESTARTED_RESULT, error=True)


def timed_out(call: ToolCall, seconds: float, tries: int) -> Json:
    """The result of a call stopped past its timeout (``Limits.tool_timeouts``), each try."""
    each = f" on each of its {tries} tries" if tries > 1 else ""
    return error_result(
        call,
        f"the call did not finish within {seconds:g} s{each} and was stopped; it may have run"
        " in part: check before repeating it",
    )


def _arguments(call: ToolCall) -> dict[str, Any] | str:
    try:
        args = json.loads(call.arguments or "{}")
    except (ValueError, RecursionError):
        return "the arguments are not JSON"
    return args if isinstance(args, dict) else "the arguments are not a JSON object"


def _name(value: object, what: str) -> str:
    """``""`` if ``value`` is a usable role or instance name, else what is wrong."""
    if isinstance(value, str) and valid_conversation_id(value):
        return ""
    return f"{what} must be letters, digits, '_', '.', '-' (at most 64)"


def over_payload(text: str, max_bytes: int, what: str) -> str:
    """``""`` if ``text`` fits in ``max_bytes`` as the JSON Temporal carries it, else what
    is wrong (its JSON escapes every non-ASCII character: "é" takes 6 bytes, an emoji 12, so
    a message under the character limit may still be too large for one payload)."""
    size = len(json.dumps(text))
    if size <= max_bytes:
        return ""
    return (
        f"{what} is {size:,} bytes as JSON, over the {max_bytes:,} one Temporal message may"
        " carry here: shorten it"
    )


def unfit_text(text: str, what: str, max_chars: int, max_bytes: int) -> str:
    """``""`` if ``text`` (a person's message, or steering) may enter a history, else what
    is wrong: empty, over ``max_chars``, or over ``max_bytes`` as JSON (it would jam the
    model calls that carry it)."""
    if not text.strip():
        return f"{what} is empty"
    if len(text) > max_chars:
        return f"{what} is over {max_chars} chars"
    return over_payload(text, max_bytes, what)


def cut_to_payload(text: str, max_chars: int, max_bytes: int, what: str) -> str:
    """``text``, or as much of its head as fits ``max_chars`` and, as JSON, ``max_bytes``,
    with a note that says it was cut (a session's reply: unbounded, it would fail the
    signal that carries it, and the parent would wait for it for ever)."""
    size = len(json.dumps(text))
    if len(text) <= max_chars and size <= max_bytes:
        return text
    note = f"\n\n[{what} was cut: {len(text):,} chars, {size:,} bytes as JSON]"
    room = max(0, min(max_chars, max_bytes) - len(json.dumps(note)))
    head = text[:room]
    while head and (used := len(json.dumps(head))) > room:  # (each pass keeps what fits, about)
        head = head[: len(head) * room // used]
    return head + note


def read_delegation(call: ToolCall, max_chars: int, max_bytes: int) -> Delegation | str:
    """A ``SubAgent`` call's request, or why it cannot run here."""
    args = _arguments(call)
    if isinstance(args, str):
        return args
    task, role = args.get("task"), args.get("role")
    interactive, instance = args.get("interactive", False), args.get("instance")
    steer = args.get("steer", False)
    if not isinstance(task, str) or not task.strip():
        return "the task is empty: say what the sub-agent should do"
    if len(task) > max_chars:
        return f"the task is over {max_chars} characters"
    if too_large := over_payload(task, max_bytes, "the task"):
        return too_large
    problem = _name(role, "role") or (instance is not None and _name(instance, "instance"))
    if problem:
        return problem
    if not isinstance(interactive, bool) or not isinstance(steer, bool):
        return "interactive and steer must be true or false"
    interactive = interactive or steer  # (steering reaches an interactive session)
    if instance is not None and not interactive:
        return "'instance' needs interactive=true"
    if unsupported := [name for name in NOT_YET if args.get(name)]:
        return f"SubAgent {', '.join(unsupported)} is not available on Temporal yet"
    assert isinstance(role, str)  # (_name checked it)
    return Delegation(task, role, interactive, instance, steer)


def read_unload(call: ToolCall) -> str | tuple[str, str]:
    """An ``UnloadSubAgent`` call's session ``(role, address)``, or what is wrong."""
    args = _arguments(call)
    if isinstance(args, str):
        return args
    role, instance = args.get("role"), args.get("instance")
    problem = _name(role, "role") or (instance is not None and _name(instance, "instance"))
    if problem:
        return problem
    assert isinstance(role, str)
    return role, role + (f":{instance}" if instance else "")


def read_question(call: ToolCall, max_chars: int, max_bytes: int) -> str | tuple[str]:
    """An ``AskParent`` call's question (in a 1-tuple), or what is wrong."""
    args = _arguments(call)
    if isinstance(args, str):
        return args
    question = args.get("question")
    if not isinstance(question, str) or not question.strip():
        return "the question is empty"
    if len(question) > max_chars:
        return f"the question is over {max_chars} characters"
    if too_large := over_payload(question, max_bytes, "the question"):
        return too_large
    return (question,)
