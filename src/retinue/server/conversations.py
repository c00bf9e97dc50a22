"""The service's conversations: one main agent per conversation id, its turns serialised.

Conversation ``abc`` is served by the main agent ``conv-abc``, so its sub-agents' ids are
``conv-abc/<role>...`` and its events can be told apart from other conversations' by prefix.
A host serves one tenant (see :mod:`retinue.server.tenants`): another tenant's host puts its
``prefix`` (``@<tenant>/``) before these agent ids, so two tenants' conversations ``abc``
never share an agent, a session or a task list.
Each conversation is a session: deleting it cancels its running turn, and a streaming client
that goes away cancels only its turn, whose cleanup (session consolidation) still finishes.

:class:`Limits` bounds the host: at most ``max_turns`` turns in flight (running or queued)
across all conversations (of every tenant's host that shares a :class:`TurnBudget`), beyond
which a turn is refused at once (:class:`ServerBusy`); and
a conversation without a turn for ``idle_s`` seconds is evicted (closed, kept in the store).

**Persistence.** With a store (:attr:`Runtime.conversations
<retinue.runtime.Runtime.conversations>`), a conversation's history is saved after each of
its turns (whatever ended it: an answer, a failure, an interrupt) and when it is evicted or
the service stops; a conversation not in memory is restored from the store by its next
message, so a restarted service continues the chat with its whole history. A turn that was
running when the process died is lost (the history goes back to the turn before it). Delete
forgets the stored history too. Stored conversations unused for
``conversation_retention_days`` are pruned. Interactive sub-agent sessions are not stored.

**Approvals that outlive the turn.** When the main agent (depth 0) asks for an approval, its
history up to that call and the request are stored at once (:meth:`ConversationStore.save
<retinue.store.conversations.ConversationStore.save>`'s ``approvals``). If the turn ends
while it waits (the service stops, or the client that sent the message goes away), the
conversation leaves memory with that state stored: it is listed again (restored with its last
step's calls unanswered), and answering it runs or refuses the call through the gate and goes
on with the turn (:meth:`Session.resume <retinue.engine.session.Session.resume>`); a new
message instead withdraws it (the step is closed as interrupted). Sub-agents' requests are
not stored (their sessions live in memory only): their turn ends as interrupted; with
durable sessions their call is recorded as waiting, and a tree revived after its worker died
asks for it again (:func:`~retinue.durable.recorder.awaiting_approval`).

**Questions that outlive the turn.** When the main agent's turn pauses on a question to the
user (``AskParent``) and the conversation leaves memory (a shared store's worker frees it
after every turn; an idle eviction; the service stops), its history is stored up to that
call, left unanswered (the step's other calls, cut short, get a result saying so): the
question is recorded, not closed as interrupted. Whichever worker restores the conversation
shows the question (:meth:`ConversationHost.question`, :func:`question_in`), and the next
message is its answer: it becomes the call's result and the same turn goes on from there
(:meth:`Session.resume <retinue.engine.session.Session.resume>`), so the history is the one
a single worker would have. Why this and not keeping the paused turn on its worker (a
sticky lease, 409 elsewhere): any worker can take the answer (no client routing, no 409 for
a user who only answers), a question survives its worker's death or a restart, and the
store needs nothing new. What it gives up is the paused turn's memory: a ``keep_sessions``
conversation still keeps its question in its worker with its sessions, as before.

**Several workers.** When the store is shared (PostgreSQL: it offers
:class:`~retinue.store.leases.ConversationLeases`), several ``retinue serve``
workers serve the same conversations, and any of them takes any conversation's next message.
Each turn runs under the conversation's lease in the database, taken before the turn (a
worker waits up to ``Limits.lease_wait_s`` while another one runs a turn of it), renewed
every third of ``Limits.lease_s`` during the turn, and released after it; the worker then
drops the conversation from memory, so its next turn, here or elsewhere, starts from the
stored history. A worker that dies mid-turn stops renewing: the lease expires after
``lease_s`` and another worker continues from the last saved turn. A ``keep_sessions`` turn
keeps its interactive sessions in this worker's memory, so its lease stays on as a *sticky*
hold until the conversation is evicted here (``idle_s``), deleted, or sent a message without
``keep_sessions``: meanwhile another worker answers its messages at once with 409 (a
:class:`ConversationHeld` error naming the worker that holds it); send them to that worker.
Consolidations that failed are retried by whichever worker is free (its periodic task claims
them with ``FOR UPDATE SKIP LOCKED``). A worker stalled longer than ``lease_s`` (it could not
renew) and lost its lease does not save that turn when it ends (it checks the lease first)
and answers 409: the history stays what the worker that took the conversation over saved.

**Durable sessions** (the ``durable_sessions`` setting, :mod:`retinue.durable`): every
session of a conversation's tree is recorded at each step, so none of the above loses
anything. A restored conversation rebuilds its recorded tree (the recorded main history wins
over the stored one, unless approvals were stored with that one): its sessions come back with
their histories and questions, and a turn cut short goes on from its last step. After each
turn on a shared store the tree is let go of (suspended: recorded, not consolidated) rather
than kept sticky, so any worker serves any message of a ``keep_sessions`` conversation (no
409). Every ``lease_s`` each worker takes up the trees whose process died
(:meth:`ConversationHost.recover`; on SQLite, at start, everything the last process left
running). The service's stop keeps the trees; deleting a conversation, or its retention,
forgets them. A sub-agent session recorded but not loaded is listed, read and answered
through its tree (:meth:`ConversationHost.act_on_session`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any, TypeVar

from retinue.durable import (
    record_conversation,
    restore_conversation,
    suspend_tree,
    tree_settled,
)
from retinue.engine.config import RunOutput
from retinue.engine.pause import stored_pause
from retinue.errors import MemoryStoreError, RetinueError, SessionClosedError
from retinue.events import EventSink
from retinue.messages import (
    Content,
    DocumentPart,
    ImagePart,
    Message,
)
from retinue.policy.approvals import Approval, ApprovalBroker, ApprovalRequest
from retinue.runtime import Conversation, Runtime
from retinue.saved import StoredPause, valid_conversation_id
from retinue.server.hub import EventHub
from retinue.store.conversations import ConversationSummary, same_prefix, title_of
from retinue.store.journal import SessionJournal, SessionRecord
from retinue.store.leases import ConversationLeases
from retinue.store.media import MediaRoom
from retinue.tools.builtin.todo import forget_todo_tree

__all__ = [
    "ConversationGone",
    "ConversationHeld",
    "ConversationHost",
    "ConversationView",
    "Limits",
    "ServerBusy",
    "TurnBudget",
    "agent_id_for",
    "question_in",
    "valid_conversation_id",
]

T = TypeVar("T")

log = logging.getLogger("retinue.server")


class ConversationGone(RetinueError):
    """The conversation was deleted while this turn waited or ran."""


class ConversationHeld(ConversationGone):
    """Another worker holds the conversation (it runs a turn of it, or keeps its sessions).
    The service answers it as it answers :class:`ConversationGone`: 409, with this line."""


class ServerBusy(RetinueError):
    """Too many turns are in flight; this one was refused before it began."""


@dataclass(frozen=True, slots=True)
class Limits:
    """Turns in flight at once (all conversations), and seconds before an idle one goes."""

    max_turns: int = 16
    idle_s: float = 3600.0
    lease_s: float = 30.0  # a worker's hold on a conversation lasts this long unrenewed
    lease_wait_s: float = 60.0  # how long a turn waits for another worker's turn to end
    retry_every_s: float = 300.0  # how often failed consolidations are retried (shared store)


@dataclass(frozen=True, slots=True)
class ConversationView:
    """One conversation as the list shows it: stored, live, or both (live wins)."""

    id: str
    title: str
    messages: int
    updated_at: float  # Unix seconds of its last turn's start or end, or its last save
    running: bool = False
    question: str | None = None


@dataclass(slots=True, eq=False)
class _Live:
    """A conversation in memory, with what the store holds of it.

    ``saved`` is the history as last saved (the same message objects), so a save writes only
    what changed after their common prefix; ``lock`` orders saves and the delete of one
    conversation; ``restored`` is done once its stored history is in place.

    ``pause`` is what the store keeps of a paused main turn (:class:`~retinue.saved.StoredPause`):
    the main agent's requests, waiting in ``approvals`` while their turn runs or restored from
    the store with no turn, and the history a question is stored with when it leaves memory.
    """

    restored: asyncio.Future[None]
    approvals: ApprovalBroker = field(default_factory=ApprovalBroker)  # calls waiting for a yes
    conversation: Conversation = field(init=False)
    pause: StoredPause = field(default_factory=StoredPause)
    saved: list[Message] = field(default_factory=list[Message])
    saved_approvals: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    updated_at: float = field(default_factory=time.time)


def agent_id_for(cid: str, prefix: str = "") -> str:
    """The main agent id that serves conversation ``cid`` (of the tenant whose agent ids
    begin with ``prefix``)."""
    return f"{prefix}conv-{cid}"


class TurnBudget:
    """Turns in flight (running or queued) across the hosts that share it."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0


class ConversationHost:
    """Keeps the conversations of one runtime, keyed by conversation id.

    Each conversation is a session (:class:`~retinue.runtime.Conversation`): its turns run in
    arrival order, and deleting it closes it (running turn cancelled, sessions consolidated).
    With a store, histories are saved and restored (see the module docstring).
    """

    PRUNE_EVERY_S = 600.0

    def __init__(
        self,
        runtime: Runtime,
        hub: EventHub,
        limits: Limits | None = None,
        *,
        prefix: str = "",
        budget: TurnBudget | None = None,
    ) -> None:
        self.runtime = runtime
        self.prefix = prefix
        self.budget = budget or TurnBudget()
        self.hub = hub
        self.limits = limits or Limits()
        self.store = runtime.conversations
        self.tenant = runtime.settings.tenant
        store = self.store
        self.leases = store if isinstance(store, ConversationLeases) else None
        memory = runtime.memory if runtime.settings.durable_sessions else None
        self.journal: SessionJournal | None = memory.journal if memory is not None else None
        self.worker = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self._live: dict[str, _Live] = {}
        self._background: set[asyncio.Task[Any]] = set()
        self._in_flight: dict[str, int] = {}  # turns running or queued, per conversation
        self._last_used: dict[str, float] = {}  # monotonic time a turn last began or ended

    def agent_id(self, cid: str) -> str:
        """The main agent id that serves ``cid`` here."""
        return agent_id_for(cid, self.prefix)

    def ids(self) -> list[str]:
        """The conversations in memory."""
        return list(self._live)

    def running(self, cid: str) -> bool:
        live = self._live.get(cid)
        return live is not None and live.conversation.session.state == "running"

    def question(self, cid: str) -> str | None:
        """What the main agent of ``cid`` asks the user, while it waits for the answer (the
        conversation's next message)."""
        live = self._live.get(cid)
        return None if live is None else live.conversation.session.question

    async def approvals(self, cid: str) -> list[ApprovalRequest]:
        """The calls of ``cid``'s agents (at any depth) waiting for a person's yes or no,
        those stored before a restart included."""
        live = await self._with_approvals(cid)
        if live is None:
            return []
        waiting = live.approvals.pending()
        ids = {r.id for r in waiting}
        return waiting + [r for r in live.pause.requests.values() if r.id not in ids]

    async def approve(self, cid: str, request_id: str, approval: Approval) -> bool:
        """Answer one pending call of ``cid``; False if it is not pending (any more). A
        request stored before a restart: once the last of its step's is answered, a turn
        goes on from there (in the background)."""
        live = await self._with_approvals(cid)
        if live is None:
            return False
        if live.approvals.answer(request_id, approval):  # its turn waits for it
            if live.pause.release(request_id):
                self._own(self._save(cid, live))  # answered: no longer kept through a stop
            return True
        if request_id not in live.pause.requests or live.approvals.pending():
            return False  # (not stored; or its turn is ending: not yet)
        if live.pause.answer(request_id, approval):  # the step's last: its turn goes on
            task = asyncio.create_task(self._resumed(cid))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        return True

    async def _with_approvals(self, cid: str) -> _Live | None:
        """``cid`` in memory, or restored if the store keeps approvals of it; else None."""
        live = self._live.get(cid)
        if live is not None or self.store is None:
            return live
        if not await self.store.approvals(self.tenant, cid):
            return None
        return await self._open(cid)

    async def _resumed(self, cid: str) -> None:
        """The turn that goes on after stored approvals were answered (nobody waits for it)."""
        try:
            await self._turn(cid, None, keep_sessions=False, on_event=None)
        except RetinueError as exc:
            log.warning("conversation %s: the turn resumed after its approval failed: %s", cid, exc)

    def _approver(self, cid: str, live: _Live) -> Callable[[ApprovalRequest], Awaitable[Approval]]:
        """What answers the calls of ``cid``'s agents: an answer given after a restart (to
        the same call: its id, tool, arguments and agent; :func:`answer_fits`), else the
        broker, the main agent's requests stored first (see the module docstring)."""

        async def save() -> None:  # (not awaited: the request is shown while it saves)
            self._own(self._save(cid, live))

        async def ask(request: ApprovalRequest) -> Approval:
            return await live.pause.ask(
                request,
                live.approvals,
                live.conversation.messages,
                save=save if self.store is not None else None,
                recorded=self.journal is not None,
            )

        return ask

    def message_count(self, cid: str) -> int:
        live = self._live.get(cid)
        return len(live.conversation.messages) if live else 0

    async def views(self, limit: int = 1000) -> list[ConversationView]:
        """Every conversation, live, stored or only recorded (durable sessions: a turn cut
        short before the history was saved), the most recently used first."""
        stored: list[ConversationSummary] = []
        if self.store is not None:
            stored = await self.store.summaries(self.tenant, limit)
        views = {s.id: ConversationView(s.id, s.title, s.messages, s.updated_at) for s in stored}
        await self._recorded_views(views, limit)
        for cid, live in self._live.items():
            if not _succeeded(live.restored) and cid in views:
                continue  # still loading: the stored view is the right one
            messages = live.conversation.messages
            views[cid] = ConversationView(
                cid, title_of(messages), len(messages), live.updated_at,
                self.running(cid), self.question(cid),
            )  # fmt: skip
        return sorted(views.values(), key=lambda v: (-v.updated_at, v.id))[:limit]

    async def _recorded_views(self, views: dict[str, ConversationView], limit: int) -> None:
        """Add the conversations whose only history is their main agent's journal record."""
        if self.journal is None:
            return
        prefix = self.agent_id("")
        for rec in await self.journal.records(self.tenant, limit):
            cid = rec.id.removeprefix(prefix)
            if rec.id != rec.root or cid == rec.id or cid in views or cid in self._live:
                continue
            if not valid_conversation_id(cid):
                continue
            found = await self.journal.load(self.tenant, rec.id)
            messages = found[1] if found is not None else []
            views[cid] = ConversationView(
                cid, title_of(messages), len(messages), rec.updated_at, question=rec.question
            )

    async def history(self, cid: str) -> list[Message] | None:
        """The history of ``cid`` (in memory, else recorded (durable sessions: it may be
        newer than the stored one), else stored), or None if there is none."""
        live = self._live.get(cid)
        if live is not None and _succeeded(live.restored) and live.conversation.messages:
            return list(live.conversation.messages)
        recorded = await self.recorded(self.agent_id(cid))
        if recorded is not None and recorded[1]:
            return recorded[1]
        if self.store is None:
            return [] if live is not None else None
        stored = await self.store.load(self.tenant, cid)
        return stored if stored is not None or live is None else []

    async def send(
        self,
        cid: str,
        text: Content,
        *,
        keep_sessions: bool = False,
        on_event: EventSink | None = None,
    ) -> RunOutput:
        """Run one main-agent turn in ``cid`` (created on first use, or restored from the
        store), after earlier turns; the history is saved when it ends.

        ``on_event`` receives the events of this conversation's agent tree during the turn
        (and asks for text deltas). Raises :class:`ConversationGone` if the conversation is
        deleted meanwhile, :class:`ServerBusy` when too many turns are in flight, and the
        turn's own errors as they are.
        """
        return await self._turn(cid, text, keep_sessions=keep_sessions, on_event=on_event)

    async def check_media_room(self, text: Content | None) -> None:
        """Refuse a message whose images and PDFs the store has no room for (a one-line
        :class:`~retinue.store.media.MediaStoreFull`) before its turn runs (each turn asks;
        a streamed one asks first, so the refusal is the response's status)."""
        if not isinstance(self.store, MediaRoom) or text is None or isinstance(text, str):
            return
        size = sum(len(p.data) for p in text if isinstance(p, ImagePart | DocumentPart))
        if size:
            await self.store.check_media_room(size)

    async def _turn(
        self, cid: str, text: Content | None, *, keep_sessions: bool, on_event: EventSink | None
    ) -> RunOutput:
        """:meth:`send` (``text=None``: go on from the history, after stored approvals)."""
        await self.check_media_room(text)
        if self.budget.count >= self.limits.max_turns:
            raise ServerBusy(f"{self.limits.max_turns} turns are already in progress; retry later")
        self.budget.count += 1
        self._in_flight[cid] = self._in_flight.get(cid, 0) + 1
        self._last_used[cid] = time.monotonic()
        try:
            async with self._lease(cid, keep_sessions) as held:
                live = await self._open(cid)
                try:
                    return await self._send(cid, live, text, keep_sessions, on_event)
                finally:
                    live.updated_at = time.time()
                    mine = await held()
                    if mine and self.journal is not None:  # durable (retinue.durable)
                        await self._save(cid, live)
                        here = self._live.get(cid) is live
                        if here and (self.leases is not None or live.pause.requests):
                            # the next message (or answer) goes on from the records, anywhere
                            await asyncio.shield(self._own(self._suspend(cid)))
                    elif mine:
                        if self.leases is not None and not keep_sessions:
                            live.pause.record_question(live.conversation.session)  # (leaving)
                        await self._save(cid, live)
                        paused = live.pause.requests or live.pause.asked
                        if paused and self._live.get(cid) is live:
                            await asyncio.shield(self._own(self._drop(cid, live)))
                        elif self.leases is not None and not keep_sessions:
                            await asyncio.shield(self._own(self._evict(cid)))  # next: anywhere
                    else:  # another worker has the conversation now: leave its history be
                        await asyncio.shield(self._own(self._drop(cid, live)))
                        raise ConversationHeld(
                            f"conversation {cid!r} was taken over by another worker during "
                            "this turn (this worker could not renew its lease); the turn was "
                            "not saved"
                        )
        finally:
            self.budget.count -= 1
            self._last_used[cid] = time.monotonic()
            self._in_flight[cid] -= 1
            if not self._in_flight[cid]:
                del self._in_flight[cid]

    @contextlib.asynccontextmanager
    async def _lease(
        self, cid: str, keep_sessions: bool, *, wait: bool = True
    ) -> AsyncIterator[Callable[[], Awaitable[bool]]]:
        """Hold ``cid``'s lease for one turn (shared store only; see the module docstring).

        Yields a check, made before the turn's history is saved: whether the lease is still
        this turn's (it renews it once more); always true without a shared store.
        """
        leases = self.leases
        if leases is None:
            yield _always
            return
        token = uuid.uuid4().hex
        await self._acquire(leases, cid, token, wait=wait)
        renewing = asyncio.create_task(self._renew(leases, cid, token))

        async def held() -> bool:
            return await leases.renew(self.tenant, cid, self.worker, token, self.limits.lease_s)

        try:
            yield held
        finally:
            renewing.cancel()
            sticky = keep_sessions and cid in self._live and self.journal is None
            hold = self.limits.idle_s if sticky else 0.0
            release = leases.release(self.tenant, cid, self.worker, token, hold_for=hold)
            await asyncio.shield(self._own(release))

    async def _acquire(
        self, leases: ConversationLeases, cid: str, token: str, *, wait: bool = True
    ) -> None:
        deadline = time.monotonic() + (self.limits.lease_wait_s if wait else 0.0)
        while True:
            holder = await leases.acquire(self.tenant, cid, self.worker, token, self.limits.lease_s)
            if holder is None:
                return
            if holder.sticky:
                raise ConversationHeld(
                    f"conversation {cid!r} keeps its sessions on worker {holder.owner}; "
                    "send its messages there (or wait until it is evicted)"
                )
            if time.monotonic() >= deadline:
                raise ConversationHeld(
                    f"conversation {cid!r} is running a turn on worker {holder.owner}; retry later"
                )
            await asyncio.sleep(min(0.2, max(0.02, holder.expires_in)))

    async def _renew(self, leases: ConversationLeases, cid: str, token: str) -> None:
        every = self.limits.lease_s / 3
        while True:
            await asyncio.sleep(every)
            try:
                if not await leases.renew(
                    self.tenant, cid, self.worker, token, self.limits.lease_s
                ):
                    log.warning("lost the lease of conversation %s (renewed too late)", cid)
                    return
            except MemoryStoreError as exc:
                log.warning("cannot renew the lease of conversation %s: %s", cid, exc)

    async def _drop(self, cid: str, live: _Live) -> None:
        """Close ``cid`` in memory without saving it (its history is another worker's now;
        durable: its tree too, so it is let go of, not ended)."""
        if self._live.get(cid) is live:
            del self._live[cid]
        if self.journal is not None:
            await suspend_tree(live.conversation)
        else:
            await live.conversation.close()

    async def _unhold(self, cid: str) -> None:
        """Give up a sticky hold on ``cid`` (its sessions are gone from this worker)."""
        if self.leases is not None:
            await self.leases.release(self.tenant, cid, self.worker, None)

    async def _open(self, cid: str) -> _Live:
        """The live conversation ``cid``, restored from the store on first use."""
        live = self._live.get(cid)
        if live is None:
            live = self._live[cid] = _Live(asyncio.Future())
            approver = self._approver(cid, live)
            live.conversation = self.runtime.conversation(self.agent_id(cid), approver=approver)
            if self.journal is not None:  # recorded from its first step (retinue.durable)
                record_conversation(live.conversation, self.journal, self.tenant)
            self._own(self._restore(cid, live), live.restored)
        await asyncio.shield(live.restored)  # a waiter that goes away leaves it to finish
        return live

    async def _restore(self, cid: str, live: _Live) -> None:
        if self.store is None and self.journal is None:
            return
        try:
            history = await self.store.load(self.tenant, cid) if self.store else None
            stored = await self.store.approvals(self.tenant, cid) if history and self.store else []
            if self.journal is not None and self._live.get(cid) is live:
                await self._restore_tree(live, history, stored)
                return
        except BaseException:
            if self._live.get(cid) is live:  # the next message tries again
                del self._live[cid]
            raise
        if history and self._live.get(cid) is live:  # not deleted while it loaded
            paused = StoredPause.read(history, stored)
            live.conversation.restore(history, pending_calls=paused is not None)
            if paused is not None and paused.question is not None:
                live.conversation.session.park(paused)  # the next message answers it
            live.pause.restore(paused, live.conversation.messages)
            live.saved, live.saved_approvals = list(live.conversation.messages), stored

    async def _restore_tree(
        self, live: _Live, history: list[Message] | None, stored: list[dict[str, Any]]
    ) -> None:
        """Durable sessions: rebuild the recorded tree (:mod:`retinue.durable`); approvals
        stored with the history keep their calls open for their answers, as without."""
        assert self.journal is not None
        paused = StoredPause.read(history, stored) if history and stored else None
        keep = {a.call.id for a in paused.approvals} if paused is not None else set[str]()
        await restore_conversation(live.conversation, self.journal, self.tenant, history,
                                   keep_open=keep)  # fmt: skip
        messages = live.conversation.messages
        live.pause.restore(paused, messages)
        same = 0  # what the conversation store holds already (equal messages, in order)
        for mine, theirs in zip(messages, history or [], strict=False):
            if mine != theirs:
                break
            same += 1
        live.saved, live.saved_approvals = messages[:same], stored

    async def _suspend(self, cid: str) -> None:
        """Durable sessions: save ``cid`` and let go of its tree here without ending it (its
        records stay, for the next message on any worker, or a restart)."""
        live = self._live.pop(cid, None)
        self._last_used.pop(cid, None)
        if live is not None:
            await self._save(cid, live, closed=True)
            await suspend_tree(live.conversation)
            if cid not in self._in_flight:
                await self._unhold(cid)

    async def recover(self, older_than: float | None = None) -> list[str]:
        """Durable sessions: take up the trees whose turns were cut short (their process
        died; the records say a session was running or closing, last written before
        ``older_than``, by default ``lease_s`` ago): each is restored here, where its turns go
        on from their last steps, and saved when they are done. Their ids."""
        if self.journal is None:
            return []
        cutoff = time.time() - self.limits.lease_s if older_than is None else older_than
        prefix = self.agent_id("")
        taken = []
        for tenant, root in await self.journal.stale(cutoff):
            cid = root.removeprefix(prefix)
            if tenant != self.tenant or cid == root or not valid_conversation_id(cid):
                continue
            if cid in self._live or cid in self._in_flight:
                continue
            self._in_flight[cid] = self._in_flight.get(cid, 0) + 1
            self._own(self._recover(cid))
            taken.append(cid)
        return taken

    async def recorded(self, agent_id: str) -> tuple[SessionRecord, list[Message]] | None:
        """Durable sessions: the record of session ``agent_id`` (of this tenant), if any."""
        if self.journal is None:
            return None
        return await self.journal.load(self.tenant, agent_id)

    async def records(self, limit: int = 1000) -> list[SessionRecord]:
        """Durable sessions: every recorded session of this host's conversations."""
        if self.journal is None:
            return []
        prefix = self.agent_id("")
        found = await self.journal.records(self.tenant, limit)
        return [r for r in found if r.root.startswith(prefix)]

    async def act_on_session(self, agent_id: str, act: Callable[[], T]) -> T | None:
        """Durable sessions: run ``act`` (an answer, steering) once the tree that holds the
        recorded session ``agent_id`` is loaded here (None if there is no such record). On a
        shared store the tree is loaded under its conversation's lease, which a task of the
        host holds until the work ``act`` started is done; then it is saved and let go of."""
        found = await self.recorded(agent_id)
        if found is None:
            return None
        cid = found[0].root.removeprefix(self.agent_id(""))
        if not valid_conversation_id(cid):
            return None
        if self.leases is None or cid in self._live:
            await self._open(cid)
            return act()
        done: asyncio.Future[T] = asyncio.get_running_loop().create_future()

        async def work() -> None:
            async with self._lease(cid, False) as held:
                live = await self._open(cid)
                done.set_result(act())
                await tree_settled(live.conversation)
                if await held() and self._live.get(cid) is live:
                    await self._save(cid, live)
                    await self._suspend(cid)

        self._in_flight[cid] = self._in_flight.get(cid, 0) + 1
        task = self._own(work())
        task.add_done_callback(lambda _t: self._done_with(cid))
        task.add_done_callback(lambda t: _settle_first(done, t))
        return await done

    def _done_with(self, cid: str) -> None:
        self._in_flight[cid] -= 1
        if not self._in_flight[cid]:
            del self._in_flight[cid]
        self._last_used[cid] = time.monotonic()

    async def _recover(self, cid: str) -> None:
        try:
            async with self._lease(cid, False, wait=False) as held:
                live = await self._open(cid)
                await tree_settled(live.conversation)
                if await held() and self._live.get(cid) is live:
                    await self._save(cid, live)
                    if self.leases is not None:
                        await self._suspend(cid)
        except ConversationHeld:
            pass  # another worker has it
        except RetinueError as exc:
            log.warning("conversation %s: resuming its recorded turns failed: %s", cid, exc)
        finally:
            self._done_with(cid)

    async def _send(
        self,
        cid: str,
        live: _Live,
        text: Content | None,
        keep_sessions: bool,
        on_event: EventSink | None,
    ) -> RunOutput:
        conversation = live.conversation
        watching = ExitStack()
        if text is not None:  # (a question's answer, or a new message: either way not kept)
            live.pause.asked = None

        def begin() -> None:  # this turn's time has come: its settings, its subscriber
            if text is not None and live.pause.requests and not live.approvals.pending():
                live.pause.withdraw(conversation.messages)  # a new message: the step closes
            conversation.keep_sessions = keep_sessions
            conversation.stream = on_event is not None
            live.updated_at = time.time()
            if on_event is not None:
                watching.enter_context(self.hub.subscribe(self.agent_id(cid), on_event))

        with watching:
            try:
                if text is None:
                    out = await conversation.resume(on_start=begin)
                else:  # (a parked question's answer: the session takes it as one)
                    out = await conversation.send(text, on_start=begin)
            except SessionClosedError:
                raise ConversationGone(f"conversation {cid!r} was deleted") from None
        if out.stop_reason == "interrupted" and conversation.session.state in ("closing", "closed"):
            raise ConversationGone(f"conversation {cid!r} was deleted during this turn")
        return out

    async def _save(self, cid: str, live: _Live, *, closed: bool = False) -> None:
        """Save what changed in ``live``'s history (unless it was deleted, or ``closed``: it
        is being evicted). Runs in a task of its own, so a cancelled caller cannot cut it
        short. A store that fails is logged, not raised: the turn's answer still reaches
        the client, and the next save writes the unsaved tail again."""
        if self.store is None or not _succeeded(live.restored):
            return
        store = self.store

        async def write() -> None:
            async with live.lock:
                if not closed and self._live.get(cid) is not live:
                    return  # deleted (or evicted, which saves itself) meanwhile
                messages, approvals = live.pause.to_save(live.conversation.messages)
                keep = same_prefix(live.saved, messages)
                same = keep == len(messages) == len(live.saved)
                if not messages or (same and approvals == live.saved_approvals):
                    return
                try:
                    await store.save(self.tenant, cid, messages, keep=keep, approvals=approvals)
                except Exception as exc:  # the store's failure must not eat the answer
                    log.error("could not save conversation %r: %s", cid, exc)
                    return
                live.saved, live.saved_approvals = messages, approvals

        await asyncio.shield(self._own(write()))

    def _own(
        self, work: Coroutine[Any, Any, None], done: asyncio.Future[None] | None = None
    ) -> asyncio.Task[None]:
        """Run ``work`` in a task the host keeps until it ends; ``done`` (if given) gets its
        outcome."""
        task = asyncio.create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        if done is not None:
            task.add_done_callback(lambda t: _settle(done, t))
        return task

    def start(
        self,
        cid: str,
        text: Content,
        *,
        keep_sessions: bool = False,
        on_event: EventSink | None = None,
    ) -> asyncio.Task[RunOutput]:
        """:meth:`send` as a task the host keeps alive until it is done (for streaming)."""
        task = asyncio.create_task(
            self.send(cid, text, keep_sessions=keep_sessions, on_event=on_event)
        )
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def delete(self, cid: str) -> list[str] | None:
        """Forget ``cid``: cancel its running turn, end its sessions (consolidated), and
        delete its stored history and its agents' task lists (TodoWrite).

        Returns the ids of the sessions it ended, or None if there is no such conversation
        (neither in memory nor stored).
        """
        live = self._live.pop(cid, None)
        self._last_used.pop(cid, None)
        ended = await live.conversation.close() if live is not None else None
        await self._unhold(cid)
        await asyncio.to_thread(forget_todo_tree, self.runtime.settings.home, self.agent_id(cid))
        if self.store is None:
            return ended
        if self.journal is not None:
            await self.journal.forget_tree(self.tenant, self.agent_id(cid))
        lock = live.lock if live is not None else asyncio.Lock()
        async with lock:
            stored = await self.store.delete(self.tenant, cid)
        return ended if live is not None else ([] if stored else None)

    async def _evict(self, cid: str) -> None:
        """Close ``cid`` in memory, its history saved (the next message restores it)."""
        live = self._live.pop(cid, None)
        self._last_used.pop(cid, None)
        if live is not None:
            live.pause.record_question(live.conversation.session)  # it outlives the turn
            await live.conversation.close()
            await self._save(cid, live, closed=True)
            if cid not in self._in_flight:  # not a turn's own eviction: its lease goes after
                await self._unhold(cid)

    async def evict_idle(self, now: float | None = None) -> list[str]:
        """Close the conversations with no turn in flight for ``limits.idle_s``; their ids."""
        now = time.monotonic() if now is None else now
        idle = [
            cid
            for cid in list(self._live)
            if cid not in self._in_flight
            and now - self._last_used.get(cid, now) >= self.limits.idle_s
        ]
        evicted = []
        for cid in idle:
            if cid not in self._in_flight:  # no turn began while an earlier one closed
                await self._evict(cid)
                evicted.append(cid)
        return evicted

    async def prune(self, now: float | None = None) -> int:
        """Forget stored conversations unused for ``conversation_retention_days`` (0: keep
        them all); how many. Either way the store drops media no conversation refers to."""
        days = self.runtime.settings.conversation_retention_days
        if self.store is None:
            return 0
        if days <= 0:
            return await self.store.prune(0.0)  # (forgets none: sweeps orphaned media)
        now = time.time() if now is None else now
        if self.journal is not None:
            await self.journal.prune(now - days * 86400.0)
        return await self.store.prune(now - days * 86400.0)

    async def evict_forever(
        self, others: Callable[[], Sequence[ConversationHost]] = lambda: ()
    ) -> None:
        """Evict idle conversations every little while (here and in ``others()``: the other
        tenants' hosts), prune old stored ones now and then, and (durable sessions) take up
        the trees whose process died, every ``lease_s`` (a task of the app's lifespan)."""
        pruned = retried = recovered = -self.PRUNE_EVERY_S
        started = time.time()  # without leases, this process is the only one: all it finds
        while True:
            if self.journal is not None and time.monotonic() - recovered >= self.limits.lease_s:
                recovered = time.monotonic()
                for host in (self, *others()):
                    await host.recover(None if self.leases is not None else started)
            if time.monotonic() - pruned >= self.PRUNE_EVERY_S:
                pruned = time.monotonic()
                await self.prune()
            if self.leases is not None and time.monotonic() - retried >= self.limits.retry_every_s:
                retried = time.monotonic()
                await self.retry_consolidations()
            pause = min(max(self.limits.idle_s / 4, 0.05), 60.0)
            if self.journal is not None:  # a dead worker's turns are taken up within lease_s
                pause = min(pause, max(self.limits.lease_s / 2, 0.05))
            await asyncio.sleep(pause)
            for host in (self, *others()):
                await host.evict_idle()

    async def retry_consolidations(self) -> None:
        """Retry the shared store's failed consolidations this worker can claim."""
        from retinue.llm.resolve import resolve_model

        memory, main = self.runtime.memory, self.runtime.model
        if memory is None:
            return
        roles = self.runtime.catalog.roles  # a role's retry writes its shared blocks too
        try:
            report = await memory.retry_pending(
                lambda name: main if name == main.name else resolve_model(name),
                shared_for=lambda role: roles[role].shared_memory if role in roles else (),
            )
        except RetinueError as exc:
            log.warning("retrying failed consolidations: %s", exc)
            return
        for session_id, error in report.failed:
            log.warning("consolidation of session %s failed again: %s", session_id, error)

    async def close_all(self) -> None:
        """End every conversation, each saved (the service is stopping)."""
        for cid in list(self._live):  # durable: the trees are kept for the next process
            await (self._suspend(cid) if self.journal is not None else self._evict(cid))
        while self._background:
            await asyncio.wait(set(self._background))


async def _always() -> bool:
    return True


def question_in(history: Sequence[Message] | None) -> str | None:
    """The question a stored history waits on (see the module docstring), if any."""
    paused = stored_pause(history) if history else None
    return paused.question.text if paused is not None and paused.question else None


def _settle_first(done: asyncio.Future[T], task: asyncio.Task[None]) -> None:
    """``task`` ended: if it never gave ``done`` its result, give it its failure."""
    if done.done():
        return
    if task.cancelled():
        done.cancel()
    else:
        done.set_exception(task.exception() or ConversationGone("the session's tree went away"))


def _succeeded(future: asyncio.Future[None]) -> bool:
    return future.done() and not future.cancelled() and future.exception() is None


def _settle(done: asyncio.Future[None], task: asyncio.Task[None]) -> None:
    if done.done():
        return
    if task.cancelled():
        done.cancel()
    elif (exc := task.exception()) is not None:
        done.set_exception(exc)
    else:
        done.set_result(None)
