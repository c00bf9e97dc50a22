"""Records that are not memory: conversations, the step journal, task lists, leases,
transcripts and media, each behind a small protocol, with their SQLite and PostgreSQL tables.

A protocol names what a caller needs and nothing more (as openai-agents' four-method
``Session`` does): :class:`ConversationStore` (load, save, list, delete a main agent's
conversation), :class:`SessionJournal` (a durable session's record and history at each
step), :class:`TaskStore` (a team's task list, claims atomic), :class:`ConversationLeases`
(which worker runs a conversation's turn), :class:`TranscriptStore` (ended sessions, found by
full-text search) and :class:`MediaRoom` (room for images and PDFs). :class:`SQLiteStore`
and :class:`PostgresStore` own one database each (its connection or pool, and the schema,
migrated on open) and hold one of each as attributes (``conversations``, ``journal``,
``tasks``, ``transcripts``, ``media``). Agents' memory lives in the same database and builds
on these classes (:mod:`retinue.memory`'s backends extend them); the store never imports
memory.
"""

from __future__ import annotations

from retinue.store.conversations import ConversationStore, ConversationSummary
from retinue.store.journal import SessionJournal, SessionRecord
from retinue.store.leases import ConversationLeases, LeaseHolder
from retinue.store.media import MediaRoom, MediaStoreFull
from retinue.store.postgres import PostgresStore
from retinue.store.sqlite import SQLiteStore
from retinue.store.tasks import Task, TaskConflictError, TaskStore
from retinue.store.transcripts import Transcript, TranscriptStore, TranscriptSummary

__all__ = [
    "ConversationLeases",
    "ConversationStore",
    "ConversationSummary",
    "LeaseHolder",
    "MediaRoom",
    "MediaStoreFull",
    "PostgresStore",
    "SQLiteStore",
    "SessionJournal",
    "SessionRecord",
    "Task",
    "TaskConflictError",
    "TaskStore",
    "Transcript",
    "TranscriptStore",
    "TranscriptSummary",
]
