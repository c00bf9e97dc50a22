"""What a paused turn waits on, as one value: :class:`Paused`.

A turn pauses in two ways: on a **question** (its ``AskParent`` call, which the next message
answers) and on **approvals** (calls that wait for a person's yes or no). Either way its
history ends with a step whose calls have no result yet: :func:`open_calls` is the one place
that finds them. A :class:`Paused` names what the turn waits on — the question's call and
text, each approval's call and request — and is the same value for a live session
(:attr:`RunOutput.paused <retinue.engine.config.RunOutput.paused>`), a saved conversation, the
HTTP service's store and a durable journal's revival: :func:`stored_pause` reads it back from
a stored history and the approval requests stored with it, :func:`asking` finds a live
question's call, and :meth:`Paused.to_dict` / :meth:`Paused.from_dict` carry it as JSON
(bounded when read back: it may come from a file or a request).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from retinue.messages import AssistantMessage, Message, ToolCall, ToolResultMessage
from retinue.policy.approvals import ApprovalRequest

__all__ = [
    "ASK_TOOL_NAME",
    "MAX_PAUSED_APPROVALS",
    "MAX_QUESTION_CHARS",
    "Paused",
    "PendingApproval",
    "Question",
    "asking",
    "close_open_calls",
    "last_step",
    "open_calls",
    "question_of",
    "read_request",
    "stored_pause",
]

ASK_TOOL_NAME = "AskParent"
"""The tool a turn asks its parent (or the user) with: its call is what a question waits on."""
MAX_PAUSED_APPROVALS = 64
"""Approvals one pause holds at most when read back (a step's calls waiting at once)."""
MAX_QUESTION_CHARS = 100_000
"""Characters of a question (and of a call's arguments) a pause read back holds at most."""

_REQUEST_FIELDS = frozenset(ApprovalRequest.__dataclass_fields__)


def last_step(messages: Sequence[Message]) -> tuple[int, AssistantMessage] | None:
    """The last model reply of ``messages`` and its index (None if there is none)."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if isinstance(m, AssistantMessage):
            return i, m
    return None


def open_calls(messages: Sequence[Message]) -> list[ToolCall]:
    """The calls of the last step of ``messages`` that have no result yet, in order."""
    found = last_step(messages)
    if found is None or not found[1].tool_calls:
        return []
    at, step = found
    answered = {m.tool_call_id for m in messages[at + 1 :] if isinstance(m, ToolResultMessage)}
    return [c for c in step.tool_calls if c.id not in answered]


def close_open_calls(
    messages: list[Message], result: str, *, keep: frozenset[str] | set[str] = frozenset()
) -> None:
    """Give every open call of the last step (:func:`open_calls`) but those in ``keep`` (by
    id) the error result ``result``, so the history is valid up to what stays open."""
    messages.extend(
        ToolResultMessage(c.id, c.name, result, True)
        for c in open_calls(messages)
        if c.id not in keep
    )


def question_of(call: ToolCall) -> str | None:
    """The question of an ``AskParent`` call's arguments (None if it has none)."""
    if call.name != ASK_TOOL_NAME:
        return None
    try:
        question = json.loads(call.arguments).get("question")
    except (ValueError, AttributeError, RecursionError):
        return None
    return question if isinstance(question, str) and question.strip() else None


@dataclass(frozen=True, slots=True)
class Question:
    """A question a turn waits on: its ``AskParent`` call (unanswered) and the text."""

    call: ToolCall
    text: str


@dataclass(frozen=True, slots=True)
class PendingApproval:
    """A call that waits for a person's yes or no, and the request a person answers."""

    call: ToolCall
    request: ApprovalRequest


@dataclass(frozen=True, slots=True)
class Paused:
    """What a paused turn waits on (see the module docstring): a question, approvals, or
    both; their calls are the ones its history's last step leaves without a result."""

    question: Question | None = None
    approvals: tuple[PendingApproval, ...] = ()

    @property
    def calls(self) -> frozenset[str]:
        """The ids of the calls this pause keeps open."""
        ids = {a.call.id for a in self.approvals}
        if self.question is not None:
            ids.add(self.question.call.id)
        return frozenset(ids)

    @property
    def requests(self) -> list[ApprovalRequest]:
        return [a.request for a in self.approvals]

    def to_dict(self) -> dict[str, Any]:
        """The pause as JSON data (:meth:`from_dict` reads it back)."""
        q = self.question
        return {
            "question": None if q is None else {"call": _call_dict(q.call), "text": q.text},
            "approvals": [
                {"call": _call_dict(a.call), "request": a.request.to_dict()} for a in self.approvals
            ],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Paused:
        """A pause from :meth:`to_dict`'s data; anything else (or over the bounds) is a
        :class:`ValueError` saying what."""
        q = data.get("question")
        question = None
        if q is not None:
            if not isinstance(q, Mapping):
                raise ValueError("a pause's question is not an object")
            q = cast("Mapping[str, Any]", q)
            text = q.get("text")
            if not isinstance(text, str) or not text.strip() or len(text) > MAX_QUESTION_CHARS:
                raise ValueError("a pause's question has no text, or too long a one")
            question = Question(_call(q.get("call")), text)
        rows = data.get("approvals", [])
        if not isinstance(rows, list) or len(cast("list[Any]", rows)) > MAX_PAUSED_APPROVALS:
            raise ValueError(
                f"a pause's approvals are not a list of {MAX_PAUSED_APPROVALS} at most"
            )
        approvals: list[PendingApproval] = []
        for row in cast("list[Any]", rows):
            if not isinstance(row, Mapping):
                raise ValueError("a pause's approval is not an object")
            row = cast("Mapping[str, Any]", row)
            call = _call(row.get("call"))
            request = read_request(row.get("request"))
            if request is None or request.call_id != call.id:
                raise ValueError("a pause's approval request does not name its call")
            approvals.append(PendingApproval(call, request))
        return cls(question, tuple(approvals))


def read_request(data: object) -> ApprovalRequest | None:
    """An approval request from its stored data (:meth:`ApprovalRequest.to_dict`), unknown
    keys left out; None if it is not one."""
    if not isinstance(data, Mapping):
        return None
    fields = {k: v for k, v in cast("Mapping[str, Any]", data).items() if k in _REQUEST_FIELDS}
    try:
        request = ApprovalRequest(**fields)
    except TypeError:
        return None
    texts = (request.id, request.agent_id, request.tool, request.arguments, request.call_id)
    if not all(isinstance(t, str) and len(t) <= MAX_QUESTION_CHARS for t in texts):
        return None
    return request if isinstance(request.depth, int) else None


def asking(messages: Sequence[Message], question: str) -> Question | None:
    """The question ``question`` of the last step's open ``AskParent`` call that asks it
    (the first such call), if any."""
    for call in open_calls(messages):
        if question_of(call) == question:
            return Question(call, question)
    return None


def stored_pause(
    history: Sequence[Message], approvals: Sequence[Mapping[str, Any]] = ()
) -> Paused | None:
    """What a stored ``history`` waits on, with the main agent's approval requests stored
    with it (``approvals``: their data): those requests, when each finds an open call of its
    last step; else its question, when the last step's only open call is an ``AskParent``
    call with one; else None (the history is not paused)."""
    calls = {c.id: c for c in open_calls(history)}
    if approvals and len(approvals) <= MAX_PAUSED_APPROVALS:
        pending: list[PendingApproval] = []
        for data in approvals:
            request = read_request(data)
            if request is None or request.depth != 0 or request.call_id not in calls:
                break
            pending.append(PendingApproval(calls[request.call_id], request))
        else:
            return Paused(approvals=tuple(pending))
    if len(calls) != 1:
        return None
    [call] = calls.values()
    text = question_of(call)
    return None if text is None else Paused(Question(call, text))


def _call_dict(call: ToolCall) -> dict[str, str]:
    return {"id": call.id, "name": call.name, "arguments": call.arguments}


def _call(data: object) -> ToolCall:
    if not isinstance(data, Mapping):
        raise ValueError("a pause's call is not an object")
    fields = cast("Mapping[str, Any]", data)
    cid, name, args = fields.get("id"), fields.get("name"), fields.get("arguments")
    if not (isinstance(cid, str) and isinstance(name, str) and isinstance(args, str)):
        raise ValueError("a pause's call needs a text id, name and arguments")
    if len(cid) + len(name) + len(args) > MAX_QUESTION_CHARS:
        raise ValueError("a pause's call is too long")
    return ToolCall(cid, name, args)
