"""Transcripts of ended sessions: what each session said and did, kept after it ends.

Every session (the main agent's and each sub-agent's, one-shot or interactive, at any depth)
leaves one :class:`TranscriptSummary` (who it was: role, parent, kind, depth; what it cost:
turns, tool calls, tokens, dollars; how it ended: ``outcome``) and its entries when it ends.
This is the record of a finished conversation, apart from long-term memory (what a role
learned) and from durable sessions (what a running session needs to go on); it is kept in
the same database, per tenant, for ``transcript_retention_days`` (see
:class:`~retinue.config.Settings`), and found by full-text search.

An **entry** is one message as a transcript shows it (:func:`entries_of`): its text, its
tool calls and their results; a model's reasoning only as a marker (``"reasoning": n``, the
number of parts), never its provider payload nor its text. Each entry's text is cut to
:data:`MAX_ENTRY_CHARS`. A transcript is named by an id of its own (``t-`` and twelve hex
digits): a session id is reused (a one-shot ``main/researcher#1`` in every run, an
interactive session reopened after it was unloaded), a transcript id never is.

Every store implements :class:`TranscriptStore` the same way; ``tests/memory/
test_transcripts.py`` pins its behaviour on SQLite (FTS5) and PostgreSQL (``tsvector``).
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol, runtime_checkable

from retinue.messages import AssistantMessage, Message, ToolResultMessage
from retinue.store.text import storable

__all__ = [
    "MAX_ENTRY_CHARS",
    "MAX_SEARCH_CHARS",
    "SEARCH_TERMS",
    "KeepsTranscripts",
    "Transcript",
    "TranscriptHit",
    "TranscriptStore",
    "TranscriptSummary",
    "children_of",
    "entries_json",
    "entries_of",
    "parse_entries",
    "search_terms",
    "searchable_text",
    "tool_call_count",
    "transcript_id",
    "transcript_store",
    "transcript_text",
    "valid_transcript_id",
]

MAX_ENTRY_CHARS = 50_000
"""Characters of one entry's text (a message, a call's arguments) kept in a transcript."""

MAX_SEARCH_CHARS = 250_000
"""Characters of a transcript's text that a search reads (PostgreSQL bounds a ``tsvector``
at 1 MB; both stores read the same)."""

SEARCH_TERMS = 16
"""Words of a search query used at most (each must occur in a transcript it finds)."""

_ID = re.compile(r"t-[0-9a-f]{12}")
_WORD = re.compile(r"\w+", re.UNICODE)


def transcript_id() -> str:
    """A new transcript id."""
    return "t-" + secrets.token_hex(6)


def valid_transcript_id(text: str) -> bool:
    return _ID.fullmatch(text) is not None


@dataclass(frozen=True, slots=True)
class TranscriptSummary:
    """One ended session as a list shows it.

    ``session_id`` is the agent id it ran under (``conv-abc/researcher``), ``parent_id`` the
    agent id of the session that started it (None for a main agent). ``kind`` is ``main``,
    ``one-shot`` or ``interactive``. ``outcome`` says how it ended: ``done`` (its last turn
    finished), ``interrupted``, ``failed``, ``asking`` (it ended with a question unanswered)
    or ``empty`` (no turn ran). Times are Unix seconds; ``cost_usd`` is None when the price
    of its model is unknown.
    """

    id: str
    session_id: str
    parent_id: str | None
    role: str
    kind: str
    depth: int
    turns: int
    tool_calls: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    requests: int
    cost_usd: float | None
    outcome: str
    started_at: float
    ended_at: float
    messages: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class Transcript:
    """A summary and its entries (see :func:`entries_of`)."""

    summary: TranscriptSummary
    entries: list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class TranscriptHit:
    """A transcript a search found, best first, with a snippet of where (the words found
    between ``«`` and ``»``)."""

    summary: TranscriptSummary
    snippet: str


def _cut(text: str) -> str:
    if len(text) <= MAX_ENTRY_CHARS:
        return text
    return text[:MAX_ENTRY_CHARS] + f"\n[… {len(text) - MAX_ENTRY_CHARS} more characters]"


def entries_of(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """The transcript entries of a history (reasoning as a count of parts only)."""
    out: list[dict[str, Any]] = []
    for message in messages:
        entry: dict[str, Any] = {"role": message.role}
        if isinstance(message, ToolResultMessage):
            entry |= {"tool_call_id": message.tool_call_id, "name": message.name}
            if message.is_error:
                entry["is_error"] = True
        entry["content"] = _cut(message.content)
        if isinstance(message, AssistantMessage):
            if message.tool_calls:
                entry["tool_calls"] = [
                    {"id": c.id, "name": c.name, "arguments": _cut(c.arguments)}
                    for c in message.tool_calls
                ]
            if message.reasoning:
                entry["reasoning"] = len(message.reasoning)
        out.append(entry)
    return out


def tool_call_count(messages: Sequence[Message]) -> int:
    return sum(len(m.tool_calls) for m in messages if isinstance(m, AssistantMessage))


def searchable_text(entries: Sequence[dict[str, Any]]) -> str:
    """What a search reads of a transcript: every entry's text, each call's name and
    arguments, each result (the system prompt is left out: every session of a role has it)."""
    parts: list[str] = []
    for entry in entries:
        if entry.get("role") == "system":
            continue
        parts.append(str(entry.get("content", "")))
        for call in entry.get("tool_calls", ()):
            parts.append(f"{call.get('name', '')} {call.get('arguments', '')}")
    return "\n".join(p for p in parts if p)[:MAX_SEARCH_CHARS]


def entries_json(entries: Sequence[dict[str, Any]]) -> str:
    return storable(json.dumps(list(entries), ensure_ascii=False))


def parse_entries(text: str) -> list[dict[str, Any]]:
    """Stored entries back; anything else stored there reads as none."""
    try:
        value = json.loads(text)
    except ValueError:
        return []
    return [e for e in value if isinstance(e, dict)] if isinstance(value, list) else []


def search_terms(query: str) -> list[str]:
    """The words of a search query (lower case, at most :data:`SEARCH_TERMS`): a transcript
    matches when it holds every one."""
    return list(dict.fromkeys(_WORD.findall(query.lower())))[:SEARCH_TERMS]


@runtime_checkable
class TranscriptStore(Protocol):
    """Where ended sessions' transcripts are kept, per tenant."""

    async def keep(
        self, tenant: str, summary: TranscriptSummary, entries: list[dict[str, Any]]
    ) -> None:
        """Store one transcript; one whose ``summary.id`` is kept already stays as it is
        (a keep tried again, as a Temporal activity may be, keeps one)."""
        ...

    async def ended(
        self,
        tenant: str,
        *,
        parent_id: str | None = None,
        session_id: str | None = None,
        limit: int = 100,
    ) -> list[TranscriptSummary]:
        """The tenant's transcripts, the latest ended first, at most ``limit``: those of
        sessions ``parent_id`` started, and those of session ``session_id``, if given."""
        ...

    async def get(self, tenant: str, tid: str) -> Transcript | None:
        """One transcript of the tenant, or None."""
        ...

    async def search(self, tenant: str, query: str, limit: int = 20) -> list[TranscriptHit]:
        """The tenant's transcripts holding every word of ``query``, best first."""
        ...

    async def prune(self, older_than: float) -> int:
        """Forget every transcript (all tenants) that ended before ``older_than`` (Unix
        seconds); how many were forgotten."""
        ...


def transcript_text(found: Transcript, limit: int = 20_000) -> str:
    """A transcript as a model reads it: a head line, then one line per entry (a call as
    ``[calls NAME] ARGS``, reasoning as a marker), cut to its last ``limit`` characters."""
    s = found.summary
    head = (
        f"Transcript {s.id} of session {s.session_id} (role {s.role}, {s.kind}, outcome "
        f"{s.outcome}; {s.turns} turns, {s.tool_calls} tool calls, {s.input_tokens} in / "
        f"{s.output_tokens} out tokens)"
    )
    lines: list[str] = []
    for entry in found.entries:
        role = str(entry.get("role", "?"))
        if role == "system":
            continue
        if entry.get("reasoning"):
            lines.append(f"[{role}: {entry['reasoning']} reasoning part(s), not shown]")
        tag = f"tool {entry.get('name', '')}{' error' if entry.get('is_error') else ''}"
        content = str(entry.get("content", ""))
        if content or not entry.get("tool_calls"):
            lines.append(f"[{tag if role == 'tool' else role}] {content}")
        for call in entry.get("tool_calls", ()):
            lines.append(f"[calls {call.get('name', '')}] {call.get('arguments', '')}")
    body = "\n".join(lines)
    if len(body) > limit:
        body = f"[… the first {len(body) - limit} characters left out]\n" + body[-limit:]
    return f"{head}\n{body}"


async def children_of(
    store: TranscriptStore, tenant: str, summary: TranscriptSummary
) -> list[TranscriptSummary]:
    """The transcripts of the sessions ``summary``'s session started while it ran (a
    session id is reused: the ones that ended within its lifetime)."""
    found = await store.ended(tenant, parent_id=summary.session_id, limit=1000)
    return [c for c in found if summary.started_at <= c.ended_at <= summary.ended_at]


@runtime_checkable
class KeepsTranscripts(Protocol):
    """A memory store that also keeps ended sessions' transcripts (both of Retinue's stores
    do; a program's own memory need not)."""

    @property
    def transcripts(self) -> TranscriptStore: ...


def transcript_store(memory: object) -> TranscriptStore | None:
    """The transcripts of a memory store, if it keeps them."""
    store = memory.transcripts if isinstance(memory, KeepsTranscripts) else None
    return store if isinstance(store, TranscriptStore) else None
