"""A main conversation's durable tree: record it, restore it, let go of it.

:func:`record_conversation` gives a fresh main conversation its recorder (its sub-agent
sessions get theirs from it as they open). :func:`restore_conversation` rebuilds a recorded
tree in a conversation that has not begun: the main session's history and state, then its
sessions (:func:`~retinue.durable.revive.revive_tree`); a main turn that was running goes on
from its last step, queued before anything else, and a question it was asking waits for the
next message. :func:`suspend_tree` lets go of the whole tree without ending it (nothing is
consolidated; the records stay for the next process), and :func:`tree_settled` waits until no
session of the tree is working.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from dataclasses import dataclass

from retinue.durable.recorder import JournalRecorder
from retinue.durable.revive import Revived, revive_tree, settle_calls
from retinue.engine.pause import stored_pause
from retinue.engine.session import INTERRUPTED_NOTE, repair_history
from retinue.messages import Message, SystemMessage
from retinue.runtime import Conversation
from retinue.store.journal import SessionJournal
from retinue.subagents.registry import Held

__all__ = [
    "Restored",
    "record_conversation",
    "restore_conversation",
    "suspend_tree",
    "tree_sessions",
    "tree_settled",
]


@dataclass(slots=True)
class Restored:
    """What :func:`restore_conversation` found: the main session's recorded history (None if
    it had no record), its state there, and the sub-agent sessions rebuilt."""

    history: list[Message] | None
    state: str
    revived: Revived


def record_conversation(
    conversation: Conversation,
    journal: SessionJournal,
    tenant: str,
    saved: list[Message] | None = None,
) -> JournalRecorder:
    """Record ``conversation``'s main session (and so its tree) from now on."""
    session = conversation.session
    recorder = JournalRecorder(
        journal, tenant, session.id, root=session.id, saved=saved if saved is not None else ()
    )
    session.set_recorder(recorder)
    return recorder


async def restore_conversation(
    conversation: Conversation,
    journal: SessionJournal,
    tenant: str,
    history: list[Message] | None,
    *,
    keep_open: Collection[str] = (),
) -> Restored:
    """Rebuild ``conversation``'s recorded tree (see the module docstring).

    ``history`` is the conversation's stored history, used when the main session has no
    record, or when ``keep_open`` names calls to leave without a result (approvals stored
    with that history, which their answer runs). A stored history's question (its last
    step's only open call asks) waits for the next message, as a recorded one does. Returns
    what it restored; the conversation is recorded from now on either way."""
    session = conversation.session
    records = await journal.load_tree(tenant, session.id)
    main = next((r for r in records if r[0].id == session.id), None)
    state, asking = "idle", None
    if main is not None and not keep_open:
        record, messages = main
        history, state = messages, record.state
        asking = record.question if state in ("asking", "running") else None
    else:
        main = None
        paused = stored_pause(history or [])
        asking = paused.question.text if paused is not None and paused.question else None
    history = list(history or [])
    stored = list(history)
    parked, again = settle_calls(history, session.config.tools, asking=asking, keep=keep_open)
    cut_off = bool(history) and not isinstance(history[-1], SystemMessage)
    if main is None and parked is None and not keep_open and cut_off:
        again = False  # a stored history cut off mid-turn (no record says where): closed
        repair_history(history, INTERRUPTED_NOTE)  # as an interrupted turn, as without
    if main is not None:
        record = main[0]
        session.restore_state(history, turns=record.turns, usage=record.usage,
                              steering=record.steering, inbox=record.inbox)  # fmt: skip
    else:
        session.restore_state(history)
    record_conversation(conversation, journal, tenant, saved=stored)
    revived = await revive_tree(conversation.runtime.manager, session, records, journal, tenant)
    if parked is not None:
        session.park(parked)
    elif not keep_open and (state in ("running", "asking") or again):
        session.start_resume()  # the turn that was cut short goes on first
    return Restored(history if main is not None else None, state, revived)


def tree_sessions(conversation: Conversation) -> list[Held]:
    """The sub-agent sessions of ``conversation``'s tree, deepest first."""
    registry = conversation.runtime.manager.registry
    found: list[Held] = []
    parents = [conversation.session.id]
    while parents:
        level = [h for p in parents for h in registry.held_by(p)]
        found.extend(level)
        parents = [h.id for h in level]
    return found[::-1]


async def suspend_tree(conversation: Conversation) -> None:
    """Let go of the tree without ending it (see the module docstring): nothing more is
    recorded, and no session of it, not even one closed by a turn cancelled on the way out
    (a one-shot sub-agent's), consolidates or loses its files here."""
    manager = conversation.runtime.manager
    main = conversation.session
    if isinstance(main.recorder, JournalRecorder):
        main.recorder.suspend()
    manager.letting_go.add(main.id)
    try:
        await main.suspend()
        while held_now := tree_sessions(conversation)[::-1]:  # parents first, until none is
            for held in held_now:  # left (a turn cut here opens nothing new: see _admit)
                await held.session.suspend()
                manager.registry.forget(held)
    finally:
        manager.letting_go.discard(main.id)


async def tree_settled(conversation: Conversation, poll_s: float = 0.2) -> None:
    """Wait until no session of the tree runs a turn or closes (a question may wait; the
    states are looked at again at least every ``poll_s``: a turn that asks stays not done)."""
    while True:
        waiting: set[asyncio.Task[object]] = set()
        for s in (conversation.session, *(h.session for h in tree_sessions(conversation))):
            if s.state in ("running", "idle"):  # idle: a turn may be queued, not begun
                waiting.update(s.tasks())
            elif s.state == "closing":
                waiting.add(s.closing())
        if not waiting:
            return
        await asyncio.wait(waiting, timeout=poll_s, return_when=asyncio.FIRST_COMPLETED)
