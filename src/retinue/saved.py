"""Saved conversations: a main-agent conversation kept in a store and resumed anywhere.

:class:`SavedConversation` is what ``Agent.conversation("some-id")`` returns: a
:class:`~retinue.runtime.Conversation` whose history lives in a
:class:`~retinue.memory.conversations.ConversationStore` (SQLite in the data directory, or
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from retinue.durable import record_conversation, restore_conversation
from retinue.engine.config import RunOutput
from retinue.engine.session import INTERRUPTED_NOTE, repair_history
from retinue.errors import ConversationError
from retinue.memory.conversations import ConversationStore, same_prefix
from retinue.memory.journal import SessionJournal
from retinue.messages import (
    AssistantMessage,
    Content,
    Message,
    ToolResultMessage,
    from_dict,
    to_dict,
)
from retinue.policy.approvals import (
    Approval,
    ApprovalRequest,
    Approver,
    answer_fits,
    ask_approver,
)
from retinue.runtime import Conversation

__all__ = [
    "EXPORT_FORMAT",
    "LOST_RESULT",
    "MAX_EXPORT_CHARS",
    "Export",
    "SavedConversation",
    "parse_export",
    "valid_conversation_id",
    "waiting_approvals",
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

_CONVERSATION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_REQUEST_FIELDS = frozenset(ApprovalRequest.__dataclass_fields__)


def valid_conversation_id(cid: str) -> bool:
    """Letters, digits, ``_ . -``; at most 64 characters; no ``/`` (ids nest by ``/``)."""
    return _CONVERSATION_ID.fullmatch(cid) is not None


def waiting_approvals(
    history: Sequence[Message], stored: Sequence[Mapping[str, Any]]
) -> list[ApprovalRequest]:
    """The stored main-agent requests whose calls the history's last step left unanswered
    (none unless every request found its call). That step's other unanswered calls may
    have run before the stop: they get a result that says so (they are not run again)."""
    requests: list[ApprovalRequest] = []
    for data in stored:
        try:
            request = ApprovalRequest(**{k: v for k, v in data.items() if k in _REQUEST_FIELDS})
        except TypeError:
            return []
        if request.depth != 0 or not request.call_id:
            return []
        requests.append(request)
    step = next((m for m in reversed(history) if isinstance(m, AssistantMessage)), None)
    if not requests or step is None or not step.tool_calls:
        return []
    at = len(history) - 1 - list(history)[::-1].index(step)
    answered = {m.tool_call_id for m in history[at + 1 :] if isinstance(m, ToolResultMessage)}
    open_calls = {c.id: c for c in step.tool_calls if c.id not in answered}
    asked = {r.call_id for r in requests}
    if not asked <= open_calls.keys() or not isinstance(history, list):
        return []
    history.extend(
        ToolResultMessage(c.id, c.name, LOST_RESULT, True)
        for c in open_calls.values()
        if c.id not in asked
    )
    return requests


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
        self._parked: dict[str, ApprovalRequest] = {}  # the main agent's stored requests
        self._parked_history: list[Message] | None = None  # the history saved with them
        self._answers: dict[str, tuple[ApprovalRequest, Approval]] = {}  # by call id
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
        parked = waiting_approvals(history, stored) if history and stored else []
        if self._journal is not None:
            keep = {r.call_id for r in parked}
            await restore_conversation(self._conversation, self._journal, self.tenant,
                                       history, keep_open=keep)  # fmt: skip
        elif history:
            self._conversation.restore(history, pending_calls=bool(parked))
        if parked:
            self._parked = {r.id: r for r in parked}
            self._parked_history = list(self.messages)
        self._saved = list(self.messages)

    async def send(self, content: Content) -> RunOutput:
        """Handle one user message after the stored history, then save. Approvals still
        pending from before are withdrawn (their step is closed as interrupted)."""
        await self.load()
        if self._parked and self._conversation.session.state == "idle":
            self._withdraw()
        try:
            return await self._conversation.send(content)
        finally:
            await self._after_turn()

    async def approvals(self) -> list[ApprovalRequest]:
        """The main agent's calls waiting for a yes or no: asked now, or stored before."""
        await self.load()
        return list(self._parked.values())

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
        request = self._parked.pop(request_id, None)
        if request is None:
            raise ConversationError(f"no pending approval {request_id!r} in {self.id!r}")
        answer = approval if isinstance(approval, Approval) else Approval(allow=approval)
        self._answers[request.call_id] = (request, answer)
        if self._parked:
            return None
        self._parked_history = None
        try:
            return await self._conversation.resume()
        finally:
            await self._after_turn()

    async def export(self) -> dict[str, Any]:
        """The conversation as a JSON-ready object (:func:`parse_export` reads it back): the
        history as saved, with its pending approvals."""
        await self.load()
        history = self._parked_history if self._parked else self.messages
        return {
            "format": EXPORT_FORMAT,
            "version": EXPORT_VERSION,
            "id": self.id,
            "messages": [to_dict(m) for m in history or ()],
            "approvals": [r.to_dict() for r in self._parked.values()],
        }

    async def close(self) -> list[str]:
        """End the conversation here (its sessions close); the stored history stays."""
        ended = await self._conversation.close()
        if self._saving:
            await asyncio.wait(set(self._saving))
        return ended

    # -- inside -----------------------------------------------------------------------

    async def _ask(self, request: ApprovalRequest) -> Approval:
        """The approver of this conversation: an answer given after a restart to the very
        same call, else the agent's approver, the main agent's requests saved first."""
        kept = self._answers.pop(request.call_id, None)
        if kept is not None and answer_fits(kept[0], request):
            return kept[1]
        approver = self._approver
        assert approver is not None  # (installed only with one)
        if request.depth > 0:
            return await ask_approver(approver, request)
        self._parked[request.id] = request
        if self._parked_history is None:
            self._parked_history = list(self.messages)
        await self._save_now()
        answer = await ask_approver(approver, request)
        # answered: no longer pending (a cancelled wait leaves it stored, see _after_turn)
        self._parked.pop(request.id, None)
        if not self._parked:
            self._parked_history = None
        return answer

    def _withdraw(self) -> None:
        """Drop the stored approvals' step: its calls get results, the turn is closed."""
        self._parked.clear()
        self._answers.clear()
        self._parked_history = None
        repair_history(self.messages, INTERRUPTED_NOTE)

    async def _after_turn(self) -> None:
        await self._save_now()
        if self._parked:  # the turn ended while approvals waited: they stay stored, and
            self._conversation = self._fresh()  # this object goes on from the store
            self._loaded = False
            self._parked, self._parked_history, self._answers = {}, None, {}

    async def _save_now(self) -> None:
        """Save in a task of its own, so a cancelled caller cannot cut the save short."""
        task = asyncio.ensure_future(self._save())
        self._saving.add(task)
        task.add_done_callback(self._saving.discard)
        await asyncio.shield(task)

    async def _save(self) -> None:
        async with self._lock:
            if self._parked and self._parked_history is not None:
                messages = self._parked_history
                approvals = [r.to_dict() for r in self._parked.values()]
            else:
                messages, approvals = list(self.messages), []
            if not messages:
                return
            keep = same_prefix(self._saved, messages)
            await self.store.save(self.tenant, self.id, messages, keep=keep,
                                  approvals=approvals)  # fmt: skip
            self._saved = list(messages)
