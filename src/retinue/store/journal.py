"""Durable sessions: the :class:`SessionJournal` protocol and the codec its stores share.

With ``durable_sessions`` on, every session of a tree (the main agent, its interactive
sub-agents, one-shot sessions paused on a question) records its state and its history at
each step boundary, after each model reply and each tool result, so that another process
can go on from the last recorded step. A session is named by ``(tenant, id)``; its id is
its agent id, and the ids below a tree's main agent carry ``/`` per level, so the depth of a
session is the number of ``/`` in its id. Nothing crosses tenants.

:meth:`SessionJournal.record` runs once per step, so it is lean: one transaction (one
statement on PostgreSQL), writing only the tail of the history that changed (``keep``, as
:meth:`ConversationStore.save <retinue.store.conversations.ConversationStore.save>` does).
The record row holds the number of messages, and a load reads only those: rows a shorter
history left behind are never read, and are removed by the next record.

A record is written by Retinue itself, but what it carries (steering, the inbox, a
question, ``extra``) comes from models and users, so :func:`encode_record` bounds it with a
:class:`~retinue.errors.MemoryStoreError` that says which bound. Messages use the one
message codec (:func:`~retinue.messages.to_dict` / :func:`~retinue.messages.from_dict`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, LiteralString, Protocol, runtime_checkable

from retinue.errors import MemoryStoreError
from retinue.messages import Message, from_dict, to_dict
from retinue.store.text import storable

__all__ = [
    "IN_FLIGHT",
    "KINDS",
    "MAX_EXTRA_CHARS",
    "MAX_RECORD_CHARS",
    "MAX_SESSION_MESSAGES",
    "RECORD_COLUMNS",
    "RESUMABLE_STATES",
    "STATES",
    "SessionJournal",
    "SessionRecord",
    "decode_messages",
    "decode_record",
    "decode_records",
    "depth_of",
    "encode_messages",
    "encode_record",
    "group_rows",
]

log = logging.getLogger("retinue.memory")

KINDS = ("main", "interactive", "one-shot")
STATES = ("idle", "running", "asking", "closing")
RESUMABLE_STATES = ("running", "closing")
"""States of a session whose process was in the middle of something: a record left in one
of them long ago is a turn whose process died (:meth:`SessionJournal.stale`)."""
IN_FLIGHT: LiteralString = "('running', 'closing')"
""":data:`RESUMABLE_STATES` as SQL, word for word the predicate of both schemas' partial
index ``session_records_in_flight`` (a query must say it so for the index to serve)."""

MAX_SESSION_MESSAGES = 20_000
"""Messages in one recorded history (compression keeps a live one far shorter)."""
MAX_EXTRA_CHARS = 64 * 1024
"""Characters of a record's ``extra`` as JSON."""
MAX_RECORD_CHARS = 1_000_000
"""Characters of a record's own JSON (steering, inbox, question and ``extra`` together)."""
_COMPACT = (",", ":")
MAX_ID_CHARS = 1_000
"""Characters of a session id, its root's and its parent's."""


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """One durable session's state, recorded at each step boundary (without its history)."""

    id: str  # the session id (= its agent id), unique per tenant
    root: str  # the agent id of the main agent of its tree (e.g. "conv-abc")
    parent_id: str | None  # the session that holds it; None for the main agent
    kind: str  # "main" | "interactive" | "one-shot"
    role: str  # role name ("main" for the main agent)
    instance: str | None = None
    state: str = "idle"  # "idle" | "running" | "asking" | "closing"
    turns: int = 0
    usage: tuple[int, int, int, int] = (0, 0, 0, 0)  # input, output, cache-read, requests
    steering: tuple[str, ...] = ()
    inbox: tuple[str, ...] = ()
    question: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)  # small JSON object (<= 64 KB)
    updated_at: float = 0.0  # Unix seconds; set by the store on record()


@runtime_checkable
class SessionJournal(Protocol):
    """Where durable sessions are recorded, per tenant (SQLite or PostgreSQL)."""

    async def record(
        self, tenant: str, rec: SessionRecord, messages: Sequence[Message], *, keep: int = 0
    ) -> None:
        """Make ``rec`` and ``messages`` the recorded state of ``rec.id``, in one
        transaction (created if new). ``keep``: the first ``keep`` messages are stored
        already, unchanged, so only ``messages[keep:]`` are written; a ``keep`` larger than
        what is stored counts as what is stored. ``rec.updated_at`` is ignored: the store
        sets it."""
        ...

    async def load_tree(self, tenant: str, root: str) -> list[tuple[SessionRecord, list[Message]]]:
        """Every recorded session of the tree ``root`` (its own record included), parents
        before children (by depth, the number of ``/`` in the id, then id)."""
        ...

    async def load(
        self, tenant: str, session_id: str
    ) -> tuple[SessionRecord, list[Message]] | None:
        """One session's record and history, or None if it is not recorded."""
        ...

    async def forget(self, tenant: str, session_id: str) -> bool:
        """Remove one session's record and history (not its children's); False if none."""
        ...

    async def forget_tree(self, tenant: str, root: str) -> int:
        """Remove every record of the tree ``root`` with its history; how many."""
        ...

    async def records(self, tenant: str | None = None, limit: int = 1000) -> list[SessionRecord]:
        """Records without histories, the most recently updated first (``tenant`` None:
        every tenant's, for ``retinue sessions``)."""
        ...

    async def stale(self, older_than: float, limit: int = 100) -> list[tuple[str, str]]:
        """``(tenant, root)`` of the trees with a session in a state of
        :data:`RESUMABLE_STATES` last recorded before ``older_than``: turns whose process
        died, for another worker to resume."""
        ...

    async def consolidated(self, run_id: str) -> bool:
        """Whether a consolidation ran as ``run_id`` was committed to this store's memory (a
        session recorded closing keeps the id its consolidation runs under: a process that
        finishes the close after a restart does not consolidate twice)."""
        ...

    async def prune(self, older_than: float) -> int:
        """Forget every tree whose newest record is older than ``older_than`` (retention);
        how many records were forgotten."""
        ...


def depth_of(session_id: str) -> int:
    """A session's level in its tree: 0 for the main agent, one more per ``/``."""
    return session_id.count("/")


def encode_record(rec: SessionRecord, messages: int) -> str:
    """The JSON of what a record holds beyond its columns (checked and bounded).

    The columns (id, root, parent, depth, kind, role, instance, state, message count, time)
    are what the stores query by; the rest is this one JSON text."""
    _check_ids(rec)
    if rec.kind not in KINDS:
        raise MemoryStoreError(f"session {rec.id!r}: kind {rec.kind!r} is not one of {KINDS}")
    if rec.state not in STATES:
        raise MemoryStoreError(f"session {rec.id!r}: state {rec.state!r} is not one of {STATES}")
    if messages > MAX_SESSION_MESSAGES:
        raise MemoryStoreError(
            f"session {rec.id!r}: {messages} messages is more than a recorded history holds "
            f"({MAX_SESSION_MESSAGES})"
        )
    try:
        extra = json.dumps(dict(rec.extra), ensure_ascii=False, separators=_COMPACT)
    except (TypeError, ValueError) as exc:
        raise MemoryStoreError(f"session {rec.id!r}: extra is not JSON: {exc}") from None
    if len(extra) > MAX_EXTRA_CHARS:
        raise MemoryStoreError(
            f"session {rec.id!r}: extra is {len(extra)} characters of JSON, more than "
            f"{MAX_EXTRA_CHARS}"
        )
    data = json.dumps(
        {
            "turns": int(rec.turns),
            "usage": [int(n) for n in rec.usage],
            "steering": list(rec.steering),
            "inbox": list(rec.inbox),
            "question": rec.question,
        },
        ensure_ascii=False,
        separators=_COMPACT,
    )
    text = storable(f'{data[:-1]},"extra":{extra}}}')
    if len(text) > MAX_RECORD_CHARS:
        raise MemoryStoreError(
            f"session {rec.id!r}: its record is {len(text)} characters of JSON (steering, "
            f"inbox, question, extra), more than {MAX_RECORD_CHARS}"
        )
    return text


def _check_ids(rec: SessionRecord) -> None:
    for name, value in (("id", rec.id), ("root", rec.root), ("parent_id", rec.parent_id)):
        if value is not None and not (0 < len(value) <= MAX_ID_CHARS):
            raise MemoryStoreError(
                f"session {rec.id[:80]!r}: {name} must be 1 to {MAX_ID_CHARS} characters"
            )


def decode_record(row: Sequence[Any]) -> SessionRecord:
    """A record from its columns ``(id, root, parent_id, kind, role, instance, state,
    data, updated_at)``, as both stores select them (:data:`RECORD_COLUMNS`)."""
    sid, root, parent, kind, role, instance, state, data, updated = row[:9]
    try:
        fields = json.loads(data)
        usage = tuple(int(n) for n in fields["usage"])
        if len(usage) != 4:
            raise ValueError("usage is not four numbers")
        return SessionRecord(
            id=sid,
            root=root,
            parent_id=parent,
            kind=kind,
            role=role,
            instance=instance,
            state=state,
            turns=int(fields["turns"]),
            usage=(usage[0], usage[1], usage[2], usage[3]),
            steering=tuple(str(s) for s in fields["steering"]),
            inbox=tuple(str(s) for s in fields["inbox"]),
            question=fields["question"],
            extra=dict(fields["extra"]),
            updated_at=float(updated),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise MemoryStoreError(f"recorded session {sid!r} is damaged: {exc}") from None


RECORD_COLUMNS: LiteralString = "id, root, parent_id, kind, role, instance, state, data, updated_at"
"""The columns :func:`decode_record` reads, in its order (prefix them with an alias)."""


def decode_records(rows: Iterable[Sequence[Any]]) -> list[SessionRecord]:
    """Records for a listing: a damaged one is logged and left out, not the whole list."""
    out: list[SessionRecord] = []
    for row in rows:
        try:
            out.append(decode_record(row))
        except MemoryStoreError as exc:
            log.warning("%s", exc)
    return out


def encode_messages(messages: Sequence[Message], start: int) -> list[str]:
    """The stored JSON of ``messages[start:]`` (the one message codec), storable."""
    return [
        storable(json.dumps(to_dict(m), ensure_ascii=False, separators=_COMPACT))
        for m in messages[start:]
    ]


def decode_messages(session_id: str, bodies: Iterable[str]) -> list[Message]:
    """Stored message JSON back as messages (a damaged one: :class:`MemoryStoreError`)."""
    try:
        return [from_dict(json.loads(body)) for body in bodies]
    except (ValueError, KeyError, TypeError) as exc:
        raise MemoryStoreError(f"recorded session {session_id!r} is damaged: {exc}") from None


def group_rows(
    rows: Iterable[Sequence[Any]],
) -> list[tuple[SessionRecord, list[Message]]]:
    """Rows of ``RECORD_COLUMNS`` followed by one message body (NULL: no message), ordered
    by session and then by message, as records with their histories."""
    out: list[tuple[SessionRecord, list[str]]] = []
    last: str | None = None
    for row in rows:
        if row[0] != last:
            out.append((decode_record(row), []))
            last = row[0]
        if row[9] is not None:
            out[-1][1].append(row[9])
    return [(rec, decode_messages(rec.id, bodies)) for rec, bodies in out]
