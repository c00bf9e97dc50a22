"""Rebuild a recorded tree of sessions in this process (after a restart, or on another worker).

What a recorded history may end with, and what becomes of it (:func:`settle_calls`): the
calls of its last step that have no result were running, or about to run, when the process
stopped. A call of an ``idempotent`` tool (a read) stays without a result, and the session's
next turn runs it again (:meth:`Session.resume <retinue.engine.session.Session.resume>`).
The question the session was asking (its ``AskParent`` call) stays unanswered: the session
is parked on it, and the next message is its answer. A call the record names as waiting for
approval (it never ran) stays without a result too, and the session's turn goes on by asking
for it again. Every other call gets
:data:`RESTARTED_RESULT`: it is not run twice, and the model is told it may have run.

:func:`revive_tree` rebuilds the sub-agent sessions of one tree under its main session,
parents before children, each with its recorded state and a recorder of its own; then a
session that was closing finishes its close (so its consolidation runs, once), and a session
whose turn was running goes on from its last step in the background (its reply waits in its
inbox for its parent, as a background turn's does).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from retinue.durable.recorder import AWAITING_KEY, MAX_AWAITING, JournalRecorder
from retinue.engine.session import Session
from retinue.errors import RetinueError
from retinue.memory.journal import SessionJournal, SessionRecord
from retinue.messages import AssistantMessage, Message, ToolCall, ToolResultMessage
from retinue.subagents.manager import SubAgentManager
from retinue.subagents.tools import ASK_TOOL_NAME
from retinue.tools.base import ToolRegistry

__all__ = [
    "RESTARTED_RESULT",
    "Revived",
    "open_ask",
    "open_question",
    "question_of",
    "revive_tree",
    "settle_calls",
]

log = logging.getLogger("retinue.durable")

RESTARTED_RESULT = (
    "Error: the process stopped (a restart, or its worker died) while this call ran; it was "
    "not run again, and it may have run in part or whole: check before repeating it. A "
    "sub-agent session whose turn was cut short goes on from its last step: ask "
    "SubAgentStatus for its reply."
)


def question_of(call: ToolCall) -> str | None:
    """The question of an ``AskParent`` call's arguments (None if it has none)."""
    try:
        question = json.loads(call.arguments).get("question")
    except (ValueError, AttributeError):
        return None
    return question if isinstance(question, str) and question.strip() else None


def _last_step(messages: Sequence[Message]) -> tuple[int, AssistantMessage] | None:
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if isinstance(m, AssistantMessage):
            return i, m
    return None


def open_ask(messages: Sequence[Message]) -> ToolCall | None:
    """The ``AskParent`` call ``messages`` wait on: their last step's only call without a
    result, when it asks a question (else None)."""
    last = _last_step(messages)
    if last is None:
        return None
    at, step = last
    answered = {m.tool_call_id for m in messages[at + 1 :] if isinstance(m, ToolResultMessage)}
    open_calls = [c for c in step.tool_calls if c.id not in answered]
    if len(open_calls) != 1 or open_calls[0].name != ASK_TOOL_NAME:
        return None
    return open_calls[0] if question_of(open_calls[0]) is not None else None


def open_question(messages: Sequence[Message]) -> str | None:
    """The question of :func:`open_ask`'s call, if any."""
    call = open_ask(messages)
    return question_of(call) if call is not None else None


def settle_calls(
    messages: list[Message],
    tools: ToolRegistry,
    *,
    asking: str | None = None,
    keep: Collection[str] = (),
) -> tuple[ToolCall | None, bool]:
    """Settle the calls of ``messages``' last step that have no result (module docstring);
    the calls named in ``keep`` (by id) stay as they are.

    Returns the ``AskParent`` call still asking ``asking`` (None if none), and whether
    calls were left to run again."""
    last = _last_step(messages)
    if last is None:
        return None, False
    at, step = last
    answered = {m.tool_call_id for m in messages[at + 1 :] if isinstance(m, ToolResultMessage)}
    parked, again = None, False
    for call in step.tool_calls:
        if call.id in answered or call.id in keep:
            continue
        if (
            asking is not None
            and parked is None
            and call.name == ASK_TOOL_NAME
            and question_of(call) == asking
        ):
            parked = call
            continue
        tool = tools.get(call.name)
        if tool is not None and tool.idempotent:
            again = True
            continue
        messages.append(ToolResultMessage(call.id, call.name, RESTARTED_RESULT, True))
    return parked, again


def _awaiting(record: SessionRecord, messages: Sequence[Message]) -> set[str]:
    """The ids of the last step's open calls that the record says wait for approval."""
    named = record.extra.get(AWAITING_KEY)
    if not isinstance(named, list) or record.state != "running":
        return set()
    wanted = {c for c in named[:MAX_AWAITING] if isinstance(c, str)}
    last = _last_step(messages)
    if last is None:
        return set()
    at, step = last
    answered = {m.tool_call_id for m in messages[at + 1 :] if isinstance(m, ToolResultMessage)}
    return {c.id for c in step.tool_calls if c.id in wanted and c.id not in answered}


@dataclass(slots=True)
class Revived:
    """What :func:`revive_tree` rebuilt: the sessions by id, those whose turn goes on, those
    finishing their close, and the records it could not rebuild (with why)."""

    sessions: dict[str, Session] = field(default_factory=dict[str, Session])
    resumed: list[Session] = field(default_factory=list[Session])
    closing: list[Session] = field(default_factory=list[Session])
    dropped: list[str] = field(default_factory=list[str])


async def revive_tree(
    manager: SubAgentManager,
    main: Session,
    records: Sequence[tuple[SessionRecord, list[Message]]],
    journal: SessionJournal,
    tenant: str,
) -> Revived:
    """Rebuild the sub-agent sessions of ``main``'s tree from ``records`` (parents first; the
    main session's own record, if given, is skipped), then let each go on (module docstring).
    A record whose session cannot be rebuilt here (its role is gone, or no longer allowed) is
    forgotten and named in :attr:`Revived.dropped`."""
    revived = Revived()
    for record, messages in records:
        if record.kind == "main" or record.id == main.id:
            continue
        run_id = record.extra.get("run_id") if record.state == "closing" else None
        if isinstance(run_id, str) and await journal.consolidated(run_id):
            await journal.forget(tenant, record.id)  # its close was done but for this
            continue
        parent = revived.sessions.get(record.parent_id or "", main)  # orphans: under main
        try:
            session = manager.revive(
                parent.config.context,
                record.role,
                record.instance,
                record.id,
                one_shot=record.kind == "one-shot",
            )
        except RetinueError as exc:
            revived.dropped.append(f"{record.id}: {exc}")
            log.warning("recorded session %s not restored: %s", record.id, exc)
            await journal.forget(tenant, record.id)
            continue
        stored = list(messages)
        asking = record.question if record.state in ("asking", "running") else None
        awaiting = _awaiting(record, messages)  # never ran: asked for again
        parked, again = settle_calls(messages, session.config.tools, asking=asking,
                                     keep=awaiting)  # fmt: skip
        again = again or bool(awaiting)
        session.restore_state(
            messages,
            turns=record.turns,
            usage=record.usage,
            steering=record.steering,
            inbox=record.inbox,
        )
        above = parent.recorder
        if not isinstance(above, JournalRecorder):  # (its parent was restored just above)
            raise RuntimeError(f"the parent of recorded session {record.id} is not recorded")
        recorder = above.child_from(
            record.id, kind=record.kind, role=record.role, instance=record.instance, saved=stored
        )
        recorder.run_id = run_id if isinstance(run_id, str) else None  # the same run, again
        session.set_recorder(recorder)
        if parked is not None and record.question is not None:
            session.park(parked, record.question)
        revived.sessions[record.id] = session
        if record.state == "closing":
            revived.closing.append(session)
        elif parked is None and (record.state in ("running", "asking") or again):
            revived.resumed.append(session)
    for session in revived.closing:
        session.closing()  # the session owns the task; its close consolidates once
    for session in revived.resumed:
        session.start_resume()
    return revived
