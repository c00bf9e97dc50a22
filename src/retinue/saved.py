"""Saved conversations: a main-agent conversation kept in a store and resumed anywhere.

:class:`SavedConversation` is what ``Agent.conversation("some-id")`` returns: a
:class:`~retinue.runtime.Conversation` whose history lives in a
:class:`~retinue.store.conversations.ConversationStore` (SQLite in the data directory, or
PostgreSQL), saved after every turn. Another process (or a later run of the same program)
that asks for the same id goes on from that history, with the system prompt *as it is now*
(the current instructions, roles and memory), never the one the history was saved with.

The store is the one the HTTP service keeps its chats in, and a conversation ``abc`` here is
the service's conversation ``abc`` (the same main agent id, ``conv-abc``).

**Approvals that outlive the process.** When the main agent asks for an approval, the history
up to that call and the request are saved before the approver is asked. If the process stops
while the approver waits (or the turn is cancelled), the request stays pending: the next
process lists it (:meth:`SavedConversation.approvals`) and answers it
(:meth:`SavedConversation.approve`), which runs or refuses the call and goes on with the
turn; a new message instead withdraws it. The stored request meets its call again by
:func:`~retinue.policy.approvals.answer_fits`, as the service's do.

**Questions that outlive the process.** A turn that ends asking (``stop_reason="asking"``)
is saved up to its ``AskParent`` call, left unanswered: the next process's next message is
the answer, and the same turn goes on. What a stored history waits on is read back as one
value (:class:`~retinue.engine.pause.Paused`), and :class:`StoredPause` keeps it, for this
class and the HTTP service alike; with durable sessions a sub-agent's call waiting for
approval is recorded so, and asked for again in the next process.

**Durable sessions** (the ``durable_sessions`` setting): the conversation's whole tree is
recorded at each step (:mod:`retinue.durable`), so interactive sub-agent sessions kept with
``keep_sessions=True`` come back too, and a turn cut short goes on from its last step.

**Export and import.** :meth:`SavedConversation.export` gives the history and pending
approvals as a JSON-ready object (``{"format": "retinue.conversation", "version": 1, ...}``);
:func:`parse_export` reads one back (bounded in size, every message checked) and raises a
one-line :class:`~retinue.errors.ConversationError` for anything else, before anything is
stored.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from retinue.durable import awaiting_approval, record_conversation, restore_conversation
from retinue.engine.config import RunOutput
from retinue.engine.pause import Paused, close_open_calls, stored_pause
from retinue.engine.pause import asking as pause_asking
from retinue.engine.session import INTERRUPTED_NOTE, Session, repair_history
from retinue.errors import ConversationError
from retinue.messages import Content, Message, from_dict, to_dict
from retinue.policy.approvals import (
    Approval,
    ApprovalRequest,
    Approver,
    answer_fits,
    ask_approver,
)
from retinue.runtime import Conversation
from retinue.store.conversations import ConversationStore, same_prefix
from retinue.store.journal import SessionJournal

__all__ = [
    "EXPORT_FORMAT",
    "LOST_RESULT",
    "MAX_EXPORT_CHARS",
    "Export",
    "SavedConversation",
    "StoredPause",
    "parse_export",
    "valid_conversation_id",
]

EXPORT_FORMAT = "retinue.conversation"
EXPORT_VERSION = 1
MAX_EXPORT_CHARS = 64_000_000
"""Characters of an exported conversation :func:`parse_export` reads at most."""
MAX_EXPORT_MESSAGES = 200_000

LOST_RESULT = (
    "Error: the service stopped while this call ran; its result was not kept (it may have "
    "run, in part or whole)"
)
CUT_SHORT_RESULT = (
    "Error: the turn paused for the user's answer and left this worker while this call ran; "
    "its result was not kept (it may have run, in part or whole)"
)

_CONVERSATION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def valid_conversation_id(cid: str) -> bool:
    """Letters, digits, ``_ . -``; at most 64 characters; no ``/`` (ids nest by ``/``)."""
    return _CONVERSATION_ID.fullmatch(cid) is not None


@dataclass(slots=True, eq=False)
class StoredPause:
    """What a conversation's store keeps of its main agent's paused turn (see
    :mod:`retinue.engine.pause`), for :class:`SavedConversation` and the HTTP service alike.

    ``requests`` are the main agent's approval requests stored with ``history`` (the history
    up to their calls): waiting while their turn runs, or restored from the store with no
    turn. ``answers`` are those answered after a restart, by call id, for the resumed turn's
    approver. ``asked`` is the history a question is stored with when its turn leaves memory
    (:meth:`record_question`)."""

    requests: dict[str, ApprovalRequest] = field(default_factory=dict[str, ApprovalRequest])
    history: list[Message] | None = None
    answers: dict[str, tuple[ApprovalRequest, Approval]] = field(
        default_factory=dict[str, tuple[ApprovalRequest, Approval]]
    )
    asked: list[Message] | None = None

    @staticmethod
    def read(history: list[Message], stored: Sequence[Mapping[str, Any]]) -> Paused | None:
        """What a stored history waits on (:func:`~retinue.engine.pause.stored_pause`); for
        approvals, the step's other open calls may have run before the stop: they get a
        result that says so (they are not run again)."""
        paused = stored_pause(history, stored)
        if paused is not None and paused.approvals:
            close_open_calls(history, LOST_RESULT, keep=paused.calls)
        return paused

    def restore(self, paused: Paused | None, messages: Sequence[Message]) -> None:
        """Keep ``paused``'s approval requests, stored with the history ``messages``."""
        if paused is not None and paused.approvals:
            self.requests = {r.id: r for r in paused.requests}
            self.history = list(messages)

    async def ask(
        self,
        request: ApprovalRequest,
        approver: Callable[[ApprovalRequest], Awaitable[Approval]],
        messages: Sequence[Message],
        *,
        save: Callable[[], Awaitable[None]] | None,
        recorded: bool = False,
    ) -> Approval:
        """Answer ``request``: the answer given after a restart to the very same call, else
        ``approver``'s. The main agent's request is stored first (``save``: None when there
        is no store), a sub-agent's is named in its journal record (``recorded``: durable
        sessions) so that a tree revived elsewhere asks for it again."""
        kept = self.answers.get(request.call_id)
        if kept is not None and answer_fits(kept[0], request):  # the very call answered
            del self.answers[request.call_id]
            return kept[1]
        if request.depth == 0 and save is not None:
            self.requests[request.id] = request
            if self.history is None:
                self.history = list(messages)
            await save()
            answer = await approver(request)
            self.release(request.id)  # (a cancelled wait leaves it stored)
            return answer
        if request.depth > 0 and recorded:
            async with awaiting_approval(request.call_id):
                return await approver(request)
        return await approver(request)

    def release(self, request_id: str) -> bool:
        """An answered request is no longer stored; True if it was."""
        found = self.requests.pop(request_id, None) is not None
        if not self.requests:
            self.history = None
        return found

    def answer(self, request_id: str, approval: Approval) -> bool | None:
        """Answer a request restored from the store: None if there is no such request, True
        once the step has no other request waiting (its turn may go on), else False."""
        request = self.requests.pop(request_id, None)
        if request is None:
            return None
        self.answers[request.call_id] = (request, approval)
        if self.requests:
            return False
        self.history = None
        return True

    def withdraw(self, messages: list[Message]) -> None:
        """Drop the stored approvals' step: its calls get results, the turn is closed."""
        self.requests.clear()
        self.answers.clear()
        self.history = None
        repair_history(messages, INTERRUPTED_NOTE)

    def record_question(self, session: Session) -> None:
        """If ``session`` (the main agent's) waits for the user's answer and no approval is
        stored, keep its question's history for the store: up to its ``AskParent`` call,
        left unanswered, the step's other open calls cut short (:data:`CUT_SHORT_RESULT`),
        rather than the history its closing writes."""
        paused = session.paused
        if paused is None or paused.question is None or self.requests or self.asked:
            return
        history = list(session.messages)
        if pause_asking(history, paused.question.text) is None:
            return
        close_open_calls(history, CUT_SHORT_RESULT, keep=paused.calls)
        self.asked = history

    def to_save(self, messages: Sequence[Message]) -> tuple[list[Message], list[dict[str, Any]]]:
        """The history to store (the one paused, else ``messages``) and the requests."""
        history = self.history if self.history is not None else self.asked
        return list(messages if history is None else history), [
            r.to_dict() for r in self.requests.values()
        ]

    def clear(self) -> None:
        self.requests, self.history, self.answers, self.asked = {}, None, {}, None


@dataclass(frozen=True, slots=True)
class Export:
    """A conversation read from its JSON export: its id, history and pending approvals."""

    id: str
    messages: list[Message]
    approvals: list[dict[str, Any]]


def parse_export(data: str | bytes | Mapping[str, Any]) -> Export:
    """An export (:meth:`SavedConversation.export`, as an object or its JSON text) read
    back; anything else is a :class:`~retinue.errors.ConversationError` saying what."""
    if isinstance(data, str | bytes):
        if len(data) > MAX_EXPORT_CHARS:
            raise ConversationError(f"conversation export over {MAX_EXPORT_CHARS:,} characters")
        try:
            data = json.loads(data)
        except (ValueError, RecursionError) as exc:
            raise ConversationError(f"conversation export is not JSON: {exc}") from None
    if not isinstance(data, Mapping) or data.get("format") != EXPORT_FORMAT:
        raise ConversationError(f'not a conversation export (no "format": {EXPORT_FORMAT!r})')
    fields = cast("Mapping[str, Any]", data)
    if fields.get("version") != EXPORT_VERSION:
        raise ConversationError(f"conversation export version {fields.get('version')!r} unknown")
    cid = fields.get("id")
    if not isinstance(cid, str) or not valid_conversation_id(cid):
        raise ConversationError(f"conversation export has a bad id: {cid!r}")
    rows = _listed(fields.get("messages"), "messages")
    if len(rows) > MAX_EXPORT_MESSAGES:
        raise ConversationError(f"conversation export has over {MAX_EXPORT_MESSAGES} messages")
    approvals = _listed(fields.get("approvals", []), "approvals")
    kept = [cast("dict[str, Any]", a) for a in approvals if isinstance(a, dict)]
    return Export(cid, [_message(n, row) for n, row in enumerate(rows)], kept)


def _listed(value: object, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise ConversationError(f"conversation export has no list of {what}")
    return cast("list[Any]", value)


def _message(n: int, row: object) -> Message:
    try:
        if not isinstance(row, dict):
            raise TypeError("not an object")
        return from_dict(cast("dict[str, Any]", row))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ConversationError(f"conversation export: message {n} is bad: {exc}") from None


class SavedConversation:
    """A conversation kept in a store under ``id`` (see the module docstring).

    Build it with ``Agent.conversation(id)``. Its stored history is read on first use
    (:meth:`load`, or the first :meth:`send` / :meth:`approvals`); with ``create=False`` an
    id the store does not know is a :class:`~retinue.errors.ConversationError` then, with
    nothing stored. ``keep_sessions`` is the conversation's own (it can be changed between
    messages).
    """

    def __init__(
        self,
        id: str,
        new: Callable[[Approver | None], Conversation],
        store: ConversationStore,
        *,
        approver: Approver | None = None,
        journal: SessionJournal | None = None,
        create: bool = True,
    ) -> None:
        if not valid_conversation_id(id):
            raise ConversationError(f"bad conversation id {id!r}: use letters, digits, _ . -")
        self.id = id
        self.store = store
        self.create = create
        self._new, self._approver, self._journal = new, approver, journal
        self._conversation = self._fresh()
        self._loaded = False
        self._lock = asyncio.Lock()  # one load; saves in order
        self._pause = StoredPause()  # the main agent's stored requests, or its question
        self._saved: list[Message] = []  # the history as last saved (the same objects)
        self._saving: set[asyncio.Task[None]] = set()

    def _fresh(self) -> Conversation:
        conversation = self._new(self._ask if self._approver is not None else None)
        if self._journal is not None:  # recorded from its first step (retinue.durable)
            record_conversation(conversation, self._journal, conversation.runtime.settings.tenant)
        return conversation

    @property
    def tenant(self) -> str:
        return self._conversation.runtime.settings.tenant

    @property
    def conversation(self) -> Conversation:
        """The conversation underneath (its session, its messages)."""
        return self._conversation

    @property
    def messages(self) -> list[Message]:
        return self._conversation.messages

    @property
    def keep_sessions(self) -> bool:
        return self._conversation.keep_sessions

    @keep_sessions.setter
    def keep_sessions(self, value: bool) -> None:
        self._conversation.keep_sessions = value

    async def load(self) -> SavedConversation:
        """Read the stored history (once); with ``create=False``, fail if there is none."""
        async with self._lock:
            if not self._loaded:
                await self._load()
                self._loaded = True
        return self

    async def _load(self) -> None:
        history = await self.store.load(self.tenant, self.id)
        if history is None and not self.create:
            raise ConversationError(f"no saved conversation {self.id!r}")
        stored = await self.store.approvals(self.tenant, self.id) if history else []
        paused = StoredPause.read(history, stored) if history else None
        if self._journal is not None:
            keep = {a.call.id for a in paused.approvals} if paused is not None else set[str]()
            await restore_conversation(self._conversation, self._journal, self.tenant,
                                       history, keep_open=keep)  # fmt: skip
        elif history:
            self._conversation.restore(history, pending_calls=paused is not None)
            if paused is not None and paused.question is not None:
                self._conversation.session.park(paused)  # the next message answers it
        self._pause.restore(paused, self.messages)
        self._saved = list(self.messages)

    async def send(self, content: Content) -> RunOutput:
        """Handle one user message after the stored history, then save. Approvals still
        pending from before are withdrawn (their step is closed as interrupted)."""
        await self.load()
        state = self._conversation.session.state
        if self._pause.requests and state == "idle":
            self._pause.withdraw(self.messages)
        if state == "asking":  # the answer: the question's history is kept no more
            self._pause.asked = None
        try:
            return await self._conversation.send(content)
        finally:
            await self._after_turn()

    async def approvals(self) -> list[ApprovalRequest]:
        """The main agent's calls waiting for a yes or no: asked now, or stored before."""
        await self.load()
        return list(self._pause.requests.values())

    async def approve(self, request_id: str, approval: Approval | bool = True) -> RunOutput | None:
        """Answer a pending approval stored before (:meth:`approvals`). Once every request
        of its step is answered the turn goes on (the call runs, or is refused) and its
        output is returned; None while others of the step still wait."""
        await self.load()
        if self._approver is None:  # without one nothing asks: a "no" would not hold
            raise ConversationError("answering a stored approval needs Agent(approver=...)")
        if self._conversation.session.state != "idle":
            raise ConversationError(
                f"conversation {self.id!r} has a turn running: its approver answers it"
            )
        answer = approval if isinstance(approval, Approval) else Approval(allow=approval)
        last = self._pause.answer(request_id, answer)
        if last is None:
            raise ConversationError(f"no pending approval {request_id!r} in {self.id!r}")
        if not last:
            return None
        try:
            return await self._conversation.resume()
        finally:
            await self._after_turn()

    async def export(self) -> dict[str, Any]:
        """The conversation as a JSON-ready object (:func:`parse_export` reads it back): the
        history as saved, with its pending approvals."""
        await self.load()
        history, approvals = self._pause.to_save(self.messages)
        return {
            "format": EXPORT_FORMAT,
            "version": EXPORT_VERSION,
            "id": self.id,
            "messages": [to_dict(m) for m in history],
            "approvals": approvals,
        }

    async def close(self) -> list[str]:
        """End the conversation here (its sessions close); the stored history stays."""
        ended = await self._conversation.close()
        if self._saving:
            await asyncio.wait(set(self._saving))
        return ended

    # -- inside -----------------------------------------------------------------------

    async def _ask(self, request: ApprovalRequest) -> Approval:
        """The approver of this conversation (:meth:`StoredPause.ask`): the main agent's
        requests are saved before the agent's approver is asked."""
        approver = self._approver
        assert approver is not None  # (installed only with one)
        return await self._pause.ask(
            request,
            lambda r: ask_approver(approver, r),
            self.messages,
            save=self._save_now,
            recorded=self._journal is not None,
        )

    async def _after_turn(self) -> None:
        session = self._conversation.session
        self._pause.record_question(session)  # asking: its question outlives this process
        await self._save_now()
        if self._pause.requests:  # the turn ended while approvals waited: they stay stored,
            self._conversation = self._fresh()  # and this object goes on from the store
            self._loaded = False
            self._pause.clear()

    async def _save_now(self) -> None:
        """Save in a task of its own, so a cancelled caller cannot cut the save short."""
        task = asyncio.ensure_future(self._save())
        self._saving.add(task)
        task.add_done_callback(self._saving.discard)
        await asyncio.shield(task)

    async def _save(self) -> None:
        async with self._lock:
            messages, approvals = self._pause.to_save(self.messages)
            if not messages:
                return
            keep = same_prefix(self._saved, messages)
            await self.store.save(self.tenant, self.id, messages, keep=keep,
                                  approvals=approvals)  # fmt: skip
            self._saved = list(messages)
