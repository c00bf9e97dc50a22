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

import logging
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import cast

from retinue.durable.recorder import AWAITING_KEY, MAX_AWAITING, JournalRecorder
from retinue.engine import pause
from retinue.engine.pause import Paused
from retinue.engine.session import Session
from retinue.errors import RetinueError
from retinue.messages import Message, ToolResultMessage
from retinue.store.journal import SessionJournal, SessionRecord
from retinue.subagents.manager import SubAgentManager
from retinue.tools.base import ToolRegistry

__all__ = [
    "RESTARTED_RESULT",
    "Revived",
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


def settle_calls(
    messages: list[Message],
    tools: ToolRegistry,
    *,
    asking: str | None = None,
    keep: Collection[str] = (),
) -> tuple[Paused | None, bool]:
    """Settle the calls of ``messages``' last step that have no result (module docstring);
    the calls named in ``keep`` (by id) stay as they are.

    Returns the pause on the ``AskParent`` call still asking ``asking`` (None if none), and
    whether calls were left to run again."""
    question = pause.asking(messages, asking) if asking is not None else None
    again = False
    for call in pause.open_calls(messages):
        if call.id in keep or (question is not None and call is question.call):
            continue
        tool = tools.get(call.name)
        if tool is not None and tool.idempotent:
            again = True
            continue
        messages.append(ToolResultMessage(call.id, call.name, RESTARTED_RESULT, True))
    return (None if question is None else Paused(question)), again


def _awaiting(record: SessionRecord, messages: Sequence[Message]) -> set[str]:
    """The ids of the last step's open calls that the record says wait for approval."""
    named = record.extra.get(AWAITING_KEY)
    if not isinstance(named, list) or record.state != "running":
        return set()
    wanted = {c for c in cast("list[object]", named)[:MAX_AWAITING] if isinstance(c, str)}
    return {c.id for c in pause.open_calls(messages) if c.id in wanted}


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
        if parked is not None:
            session.park(parked)
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
