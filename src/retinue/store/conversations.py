"""Stored conversations of the main agent: the :class:`ConversationStore` protocol.

The HTTP service keeps each conversation's history (every message: system prompt, user
turns, assistant replies, tool calls and results) in the store, so a restarted service
continues a chat with its whole history; so does the library's ``Agent.conversation(id)``
(:mod:`retinue.saved`), in the same store, under the same ids. Interactive sub-agent
sessions are never stored here (what they learned lives on through consolidation; durable
sessions keep them in the journal).

A conversation is named by ``(tenant, id)``; nothing crosses tenants. Its history is an
ordered list of :class:`~retinue.messages.Message`, written whole by :meth:`save` (with a
hint of how much is already stored, so a long chat writes only its new tail). Every store
(SQLite in the data directory, PostgreSQL for several workers) implements the protocol the
same way; ``tests/memory/test_conversations.py`` pins its behaviour.

Besides its history, a conversation keeps the **approvals** its main agent waits for (each a
JSON object: the service's :class:`~retinue.policy.approvals.ApprovalRequest` fields), saved
with the history they belong to (one that ends with the calls waiting), so a restarted
service lists them and goes on when they are answered. Every save sets them (none by default).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from retinue.messages import Message, UserMessage

__all__ = [
    "TITLE_CHARS",
    "ConversationStore",
    "ConversationSummary",
    "approvals_json",
    "parse_approvals",
    "same_prefix",
    "title_of",
]

MAX_APPROVALS_JSON = 1_000_000
"""Characters of a conversation's stored approvals (each holds at most a 2,000-character
preview of its call's arguments): beyond that a save keeps none."""

TITLE_CHARS = 80
"""Characters of the first user message kept as a conversation's title."""


@dataclass(frozen=True, slots=True)
class ConversationSummary:
    """One stored conversation as a list shows it: its title (the first user message, on
    one line, cut to :data:`TITLE_CHARS`), its number of messages, and when it was created
    and last saved (Unix seconds)."""

    id: str
    title: str
    messages: int
    created_at: float
    updated_at: float


def same_prefix(a: Sequence[Message], b: Sequence[Message]) -> int:
    """How many leading messages ``a`` and ``b`` share (the very same objects): what a save
    of ``b`` after one of ``a`` may ``keep``."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x is not y:
            break
        n += 1
    return n


def title_of(messages: Sequence[Message]) -> str:
    """The title of a history: its first user message on one line, cut short ("" if none).

    A first message that opens with a note alone on its line (``[Earlier in this
    conversation…:]``: a transcript a client sent to begin the chat, as the OpenAI-compatible
    endpoint seeds one) is titled by what its user said first: the first ``[user] …`` line,
    else the first line after the last such note (the new message); tagged lines such as
    ``[instructions] …`` are not a title.
    """
    for message in messages:
        if isinstance(message, UserMessage):
            line = " ".join(_first_said(message.content).split())
            return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1] + "…"
    return ""


def _first_said(text: str) -> str:
    lines = text.strip().splitlines()
    if not lines or not _is_note(lines[0]):
        return text
    for line in lines:
        if line.startswith(_USER_TAG):
            return line[len(_USER_TAG) :]
    after = [i for i, line in enumerate(lines) if _is_note(line)][-1] + 1
    return next((line for line in lines[after:] if line.strip()), text)


_USER_TAG = "[user] "


def _is_note(line: str) -> bool:
    s = line.strip()
    return len(s) > 2 and s[0] == "[" and s[-1] == "]" and "]" not in s[1:-1]


def approvals_json(approvals: Sequence[Mapping[str, Any]]) -> str:
    """The stored form of a conversation's pending approvals ("[]" if too large)."""
    text = json.dumps([dict(a) for a in approvals], ensure_ascii=False)
    return text if len(text) <= MAX_APPROVALS_JSON else "[]"


def parse_approvals(text: str | None) -> list[dict[str, Any]]:
    """Stored approvals back as objects; anything else stored there reads as none."""
    try:
        value = json.loads(text or "[]")
    except ValueError:
        return []
    if not isinstance(value, list):
        return []
    return [a for a in value if isinstance(a, dict)]


@runtime_checkable
class ConversationStore(Protocol):
    """Where the main agent's conversations are kept, per tenant."""

    async def load(self, tenant: str, cid: str) -> list[Message] | None:
        """The stored history of ``cid`` in order, or None if there is no such conversation."""
        ...

    async def save(
        self,
        tenant: str,
        cid: str,
        messages: Sequence[Message],
        *,
        keep: int = 0,
        approvals: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        """Make ``messages`` the stored history of ``cid`` (created if new), and
        ``approvals`` its pending approvals, atomically.

        ``keep`` says that the first ``keep`` messages are stored already, unchanged: only
        ``messages[keep:]`` need writing (whatever was stored from position ``keep`` on is
        replaced). ``keep=0`` rewrites the whole history; a ``keep`` larger than what is
        stored counts as what is stored.
        """
        ...

    async def approvals(self, tenant: str, cid: str) -> list[dict[str, Any]]:
        """The pending approvals saved with ``cid``'s history ([] if none, or no such
        conversation)."""
        ...

    async def summaries(self, tenant: str, limit: int = 1000) -> list[ConversationSummary]:
        """The tenant's conversations, the most recently saved first, at most ``limit``."""
        ...

    async def delete(self, tenant: str, cid: str) -> bool:
        """Forget ``cid`` and its whole history; False if there was no such conversation."""
        ...

    async def prune(self, older_than: float) -> int:
        """Forget every conversation (all tenants) last saved before ``older_than`` (Unix
        seconds); how many were forgotten."""
        ...
