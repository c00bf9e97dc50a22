"""The recorder of one durable session: its state into the memory store's journal.

Each write takes a snapshot of the session at once (its record and the list of its messages,
the same objects) and stores it in a task of its own, so a caller that is cancelled cannot
cut a write short (:meth:`JournalRecorder.record` waits for it all the same). Writes of one
session run one at a time, in the order they were asked for; each writes only the tail that
changed since the last one (the messages after the longest prefix of the very same objects).
A store that fails is logged, not raised: the session goes on, and the next write writes
the unsaved tail again.

A call waiting for a person's approval (:func:`awaiting_approval`) is named in the record
(``extra["awaiting"]``): it has not run, so a tree revived elsewhere asks for it again rather
than report it cut short (:func:`~retinue.durable.revive.revive_tree`).

The recorders of one tree share one :class:`_Tree`: once the tree is let go of here
(:meth:`JournalRecorder.suspend`, what a process that dies does by not running), none of its
recorders writes or forgets anything more, so what the turns cancelled on the way out do
(closing their steps as interrupted) never reaches the records.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Coroutine, Sequence
from contextlib import asynccontextmanager
from typing import Any

from retinue._tasks import finish
from retinue.engine.session import Recorder, Session, current_session
from retinue.messages import Message
from retinue.store.conversations import same_prefix
from retinue.store.journal import SessionJournal, SessionRecord

__all__ = ["AWAITING_KEY", "MAX_AWAITING", "JournalRecorder", "awaiting_approval"]

AWAITING_KEY = "awaiting"  # in a record's extra: the ids of calls waiting for approval
MAX_AWAITING = 64  # of those kept in one record (a step's calls waiting at once)

log = logging.getLogger("retinue.durable")


class _Tree:
    """What the recorders of one tree share: whether it is being let go of here."""

    __slots__ = ("let_go",)

    def __init__(self) -> None:
        self.let_go = False


class JournalRecorder:
    """Records one session (``session_id``) of the tree ``root`` in ``journal``."""

    __slots__ = (
        "_gone",
        "_lock",
        "_saved",
        "_tasks",
        "_tree",
        "awaiting",
        "instance",
        "journal",
        "kind",
        "parent_id",
        "role",
        "root",
        "run_id",
        "session_id",
        "tenant",
    )

    def __init__(
        self,
        journal: SessionJournal,
        tenant: str,
        session_id: str,
        *,
        root: str,
        parent_id: str | None = None,
        kind: str = "main",
        role: str = "main",
        instance: str | None = None,
        saved: Sequence[Message] = (),
        tree: _Tree | None = None,
    ) -> None:
        self.journal, self.tenant, self.session_id = journal, tenant, session_id
        self.root, self.parent_id, self.kind = root, parent_id, kind
        self.role, self.instance = role, instance
        self._saved: list[Message] = list(saved)  # as last written (the same objects)
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        self._gone = False
        self._tree = tree or _Tree()
        self.run_id: str | None = None  # its consolidation's, fixed when it first closes
        self.awaiting: list[str] = []  # ids of its calls waiting for approval now

    def snapshot(self, session: Session) -> tuple[SessionRecord, list[Message]]:
        """The session's record and history as they are now (closing: with the id its
        consolidation runs under)."""
        state = session.state if session.state != "closed" else "closing"
        if state == "closing" and self.run_id is None:
            self.run_id = uuid.uuid4().hex
        record = SessionRecord(
            id=self.session_id,
            root=self.root,
            parent_id=self.parent_id,
            kind=self.kind,
            role=self.role,
            instance=self.instance,
            state=state,
            turns=session.turns,
            usage=session.usage_figures,
            steering=session.pending_steering,
            inbox=tuple(session.inbox),
            question=session.question,
            extra=self._extra(),
        )
        return record, list(session.messages)

    def _extra(self) -> dict[str, object]:
        extra: dict[str, object] = {}
        if self.run_id is not None:
            extra["run_id"] = self.run_id
        if self.awaiting:
            extra[AWAITING_KEY] = self.awaiting[:MAX_AWAITING]
        return extra

    async def record(self, session: Session) -> None:
        await finish(self._write(*self.snapshot(session)))

    def touch(self, session: Session) -> None:
        self._write(*self.snapshot(session))

    async def forget(self, session: Session) -> None:
        await finish(self._own(self._forget()))

    def child(self, session_id: str, *, kind: str, role: str, instance: str | None) -> Recorder:
        return self.child_from(session_id, kind=kind, role=role, instance=instance)

    def child_from(
        self,
        session_id: str,
        *,
        kind: str,
        role: str,
        instance: str | None,
        saved: Sequence[Message] = (),
    ) -> JournalRecorder:
        """:meth:`child`, for a session whose history ``saved`` is recorded already."""
        return JournalRecorder(
            self.journal, self.tenant, session_id, root=self.root, parent_id=self.session_id,
            kind=kind, role=role, instance=instance, saved=saved, tree=self._tree,
        )  # fmt: skip

    @property
    def suspended(self) -> bool:
        """Whether the tree is let go of here (nothing more is written)."""
        return self._tree.let_go

    def suspend(self) -> None:
        """Let go of the whole tree here: none of its recorders writes anything more."""
        self._tree.let_go = True

    async def settled(self) -> None:
        """Wait until the writes asked for so far are done."""
        while self._tasks:
            await asyncio.wait(set(self._tasks))

    def _write(self, record: SessionRecord, messages: list[Message]) -> asyncio.Task[None]:
        return self._own(self._store(record, messages))

    def _own(self, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _store(self, record: SessionRecord, messages: list[Message]) -> None:
        async with self._lock:
            if self._gone or self._tree.let_go:
                return
            keep = same_prefix(self._saved, messages)
            try:
                await self.journal.record(self.tenant, record, messages, keep=keep)
            except Exception as exc:  # the session goes on; the next write tries again
                log.error("could not record session %s: %s", self.session_id, exc)
                return
            self._saved = messages

    async def _forget(self) -> None:
        async with self._lock:
            self._gone = True
            if self._tree.let_go:
                return
            try:
                await self.journal.forget(self.tenant, self.session_id)
            except Exception as exc:
                log.error("could not forget the record of session %s: %s", self.session_id, exc)


@asynccontextmanager
async def awaiting_approval(call_id: str) -> AsyncIterator[None]:
    """While the call ``call_id`` of the session running here waits for a person's approval:
    recorded so (a durable session's; otherwise nothing happens), so that a worker that dies
    meanwhile leaves the call to be asked for again where its tree is revived."""
    session = current_session()
    recorder = session.recorder if session is not None else None
    if session is None or not call_id or not isinstance(recorder, JournalRecorder):
        yield
        return
    recorder.awaiting.append(call_id)
    await recorder.record(session)
    try:
        yield
    finally:
        recorder.awaiting.remove(call_id)
