"""The SQLite :class:`~retinue.store.transcripts.TranscriptStore`: in the memory database.

A transcript is a row of ``transcripts`` (its summary's columns and its entries as JSON);
its searchable text is a row of the FTS5 table ``transcripts_fts`` with the same rowid,
written in the same transaction with the store's connection and lock (see
:mod:`retinue.store.sqlite`). A search is an FTS5 query holding every word asked, ranked by
BM25.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, LiteralString

from retinue.store.plumbing import SQLiteRead, SQLiteTx
from retinue.store.text import storable
from retinue.store.transcripts import (
    Transcript,
    TranscriptHit,
    TranscriptSummary,
    entries_json,
    parse_entries,
    search_terms,
    searchable_text,
)

__all__ = ["SUMMARY_COLUMNS", "SQLiteTranscripts"]


SUMMARY_COLUMNS: LiteralString = (
    "id, session_id, parent_id, role, kind, depth, turns, tool_calls, input_tokens, "
    "output_tokens, cache_read_tokens, requests, cost_usd, outcome, started_at, ended_at, "
    "message_count"
)
"""The columns of a :class:`TranscriptSummary`, in its fields' order (both stores)."""


def summary_of(row: Sequence[Any]) -> TranscriptSummary:
    return TranscriptSummary(*row[:17])


class SQLiteTranscripts:
    """Transcripts in the memory database; built by :class:`~retinue.store.sqlite.SQLiteStore`
    with its write transaction (``tx``) and its locked reader (``read``)."""

    def __init__(self, tx: SQLiteTx, read: SQLiteRead) -> None:
        self._tx = tx
        self._read = read

    async def keep(
        self, tenant: str, summary: TranscriptSummary, entries: list[dict[str, Any]]
    ) -> None:
        await asyncio.to_thread(self._keep, tenant, summary, entries)

    def _keep(self, tenant: str, s: TranscriptSummary, entries: list[dict[str, Any]]) -> None:
        body, text = entries_json(entries), storable(searchable_text(entries))
        with self._tx() as conn:
            added = conn.execute(
                f"INSERT INTO transcripts (tenant, {SUMMARY_COLUMNS}, body) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (id) DO NOTHING",
                (tenant, s.id, s.session_id, s.parent_id, s.role, s.kind, s.depth, s.turns,
                 s.tool_calls, s.input_tokens, s.output_tokens, s.cache_read_tokens,
                 s.requests, s.cost_usd, s.outcome, s.started_at, s.ended_at, s.messages,
                 body),
            )  # fmt: skip
            if added.rowcount == 1:  # (kept before under this id: the first stands)
                conn.execute("INSERT INTO transcripts_fts (rowid, text) VALUES (?, ?)",
                             (added.lastrowid, text))  # fmt: skip

    async def ended(
        self,
        tenant: str,
        *,
        parent_id: str | None = None,
        session_id: str | None = None,
        limit: int = 100,
    ) -> list[TranscriptSummary]:
        where, params = "tenant = ?", [tenant]
        if parent_id is not None:
            where, params = where + " AND parent_id = ?", [*params, parent_id]
        if session_id is not None:
            where, params = where + " AND session_id = ?", [*params, session_id]
        rows = await asyncio.to_thread(
            self._read,
            f"SELECT {SUMMARY_COLUMNS} FROM transcripts WHERE {where} "
            "ORDER BY ended_at DESC, id LIMIT ?",
            (*params, max(0, limit)),
        )
        return [summary_of(r) for r in rows]

    async def get(self, tenant: str, tid: str) -> Transcript | None:
        rows = await asyncio.to_thread(
            self._read,
            f"SELECT {SUMMARY_COLUMNS}, body FROM transcripts WHERE tenant = ? AND id = ?",
            (tenant, tid),
        )
        if not rows:
            return None
        return Transcript(summary_of(rows[0]), parse_entries(rows[0][-1]))

    async def search(self, tenant: str, query: str, limit: int = 20) -> list[TranscriptHit]:
        terms = search_terms(query)
        if not terms:
            return []
        match = " ".join(f'"{t}"' for t in terms)  # every word (quoted: never FTS5 syntax)
        rows = await asyncio.to_thread(
            self._read,
            f"SELECT {', '.join('t.' + c.strip() for c in SUMMARY_COLUMNS.split(','))}, "
            "snippet(transcripts_fts, 0, '«', '»', '…', 16) FROM transcripts_fts f "
            "JOIN transcripts t ON t.rowid = f.rowid "
            "WHERE transcripts_fts MATCH ? AND t.tenant = ? ORDER BY f.rank LIMIT ?",
            (match, tenant, max(0, limit)),
        )
        return [TranscriptHit(summary_of(r), r[-1]) for r in rows]

    async def prune(self, older_than: float) -> int:
        return await asyncio.to_thread(self._prune, older_than)

    def _prune(self, older_than: float) -> int:
        with self._tx() as conn:
            conn.execute(
                "DELETE FROM transcripts_fts WHERE rowid IN "
                "(SELECT rowid FROM transcripts WHERE ended_at < ?)",
                (older_than,),
            )
            return conn.execute(
                "DELETE FROM transcripts WHERE ended_at < ?", (older_than,)
            ).rowcount
