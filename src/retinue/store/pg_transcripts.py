"""The PostgreSQL :class:`~retinue.store.transcripts.TranscriptStore`.

The table mirrors the SQLite store's ``transcripts`` (the summary's columns, the entries as
JSON), plus the searchable ``text`` and its ``tsvector`` (the ``simple`` configuration, as
archival passages use: no stemming, any language) under a GIN index. A search asks for every
word (``plainto_tsquery``), ranks by ``ts_rank`` and shows where with ``ts_headline``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from retinue.store.plumbing import PgConnects
from retinue.store.sqlite_transcripts import SUMMARY_COLUMNS, summary_of
from retinue.store.text import pg_text
from retinue.store.transcripts import (
    Transcript,
    TranscriptHit,
    TranscriptSummary,
    entries_json,
    parse_entries,
    search_terms,
    searchable_text,
)

if TYPE_CHECKING:
    pass

__all__ = ["PgTranscripts"]

_HEADLINE = "StartSel=«, StopSel=», MaxWords=24, MinWords=8, FragmentDelimiter=…, MaxFragments=2"


class PgTranscripts:
    """Transcripts in the memory database of a :class:`~retinue.store.postgres.PostgresStore`."""

    def __init__(self, store: PgConnects) -> None:
        self.store = store

    async def keep(
        self, tenant: str, summary: TranscriptSummary, entries: list[dict[str, Any]]
    ) -> None:
        s = summary
        text = pg_text(searchable_text(entries))
        async with self.store.connection() as conn:
            await conn.execute(
                f"INSERT INTO transcripts (tenant, {SUMMARY_COLUMNS}, body, text, tsv) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, "
                "%s, %s, %s, to_tsvector('simple', %s)) ON CONFLICT (id) DO NOTHING",
                (tenant, s.id, s.session_id, s.parent_id, s.role, s.kind, s.depth, s.turns,
                 s.tool_calls, s.input_tokens, s.output_tokens, s.cache_read_tokens,
                 s.requests, s.cost_usd, s.outcome, s.started_at, s.ended_at, s.messages,
                 pg_text(entries_json(entries)), text, text),
            )  # fmt: skip

    async def ended(
        self,
        tenant: str,
        *,
        parent_id: str | None = None,
        session_id: str | None = None,
        limit: int = 100,
    ) -> list[TranscriptSummary]:
        async with self.store.connection() as conn:
            cur = await conn.execute(
                f"SELECT {SUMMARY_COLUMNS} FROM transcripts WHERE tenant = %s "
                "AND (%s::text IS NULL OR parent_id = %s) "
                "AND (%s::text IS NULL OR session_id = %s) "
                "ORDER BY ended_at DESC, id LIMIT %s",
                (tenant, parent_id, parent_id, session_id, session_id, max(0, limit)),
            )
            rows = await cur.fetchall()
        return [summary_of(r) for r in rows]

    async def get(self, tenant: str, tid: str) -> Transcript | None:
        async with self.store.connection() as conn:
            cur = await conn.execute(
                f"SELECT {SUMMARY_COLUMNS}, body FROM transcripts WHERE tenant = %s AND id = %s",
                (tenant, tid),
            )
            row = await cur.fetchone()
        return None if row is None else Transcript(summary_of(row), parse_entries(row[-1]))

    async def search(self, tenant: str, query: str, limit: int = 20) -> list[TranscriptHit]:
        terms = search_terms(query)
        if not terms:
            return []
        async with self.store.connection() as conn:
            cur = await conn.execute(
                f"SELECT {SUMMARY_COLUMNS}, ts_headline('simple', text, q, %s) "
                "FROM transcripts, plainto_tsquery('simple', %s) q "
                "WHERE tenant = %s AND tsv @@ q ORDER BY ts_rank(tsv, q) DESC, ended_at DESC "
                "LIMIT %s",
                (_HEADLINE, " ".join(terms), tenant, max(0, limit)),
            )
            rows = await cur.fetchall()
        return [TranscriptHit(summary_of(r), r[-1]) for r in rows]

    async def prune(self, older_than: float) -> int:
        async with self.store.connection() as conn:
            cur = await conn.execute("DELETE FROM transcripts WHERE ended_at < %s", (older_than,))
            return cur.rowcount
