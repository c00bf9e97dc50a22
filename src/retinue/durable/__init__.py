"""Durable sessions: every session's state recorded at each step, so sessions and paused
turns survive a restart and move between workers (the ``durable_sessions`` setting, off by
default). A session with a :class:`~retinue.durable.recorder.JournalRecorder` hands its state
(history, turn state, tokens, steering, inbox, question) to the memory store's
:class:`~retinue.store.journal.SessionJournal` at every step boundary: its turn's start, each
model reply, each step's tool results, a question, its turn's end and its close; a sub-agent
session it opens gets a recorder of the same tree. :func:`~retinue.durable.revive.revive_tree`
rebuilds a recorded tree in another process: a call that was running when the process died is
reported to the model as cut short by a restart and is not run again (unless its tool is
``idempotent``), a question asked before the restart waits for its answer, a turn that was
running goes on from its last recorded step, and a session that was closing finishes its close
(its consolidation runs once). Without the setting nothing here runs and a step costs nothing
more. Why Retinue's own store and not a durable-execution engine (DBOS): see
``benchmarks/RESULTS.md``, "Durable steps".
"""

from retinue.durable.recorder import JournalRecorder, awaiting_approval
from retinue.durable.revive import (
    RESTARTED_RESULT,
    Revived,
    revive_tree,
    settle_calls,
)
from retinue.durable.tree import (
    Restored,
    record_conversation,
    restore_conversation,
    suspend_tree,
    tree_sessions,
    tree_settled,
)

__all__ = [
    "RESTARTED_RESULT",
    "JournalRecorder",
    "Restored",
    "Revived",
    "awaiting_approval",
    "record_conversation",
    "restore_conversation",
    "revive_tree",
    "settle_calls",
    "suspend_tree",
    "tree_sessions",
    "tree_settled",
]
