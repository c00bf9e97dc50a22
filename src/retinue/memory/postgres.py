"""The shared memory store: core blocks, archival passages and the retry queue in PostgreSQL.

For deployments that outgrow one machine: several ``retinue serve`` workers open the same
database. It implements the same faces as :class:`~retinue.memory.sqlite.SQLiteMemory`
(:class:`~retinue.memory.base.Memory` and :class:`~retinue.memory.store.MemoryStore`), and
consolidation (:mod:`retinue.memory.consolidate`) runs unchanged on top of it.

- The pool, the schema and the records that are not memory (conversations and their
  leases, the journal, task lists, transcripts) are
  :class:`~retinue.store.postgres.PostgresStore`'s, which this store extends.
- Every write transaction of a ``(tenant, role)`` scope first takes a transaction-scoped
  advisory lock on that scope, so the read-modify-write of a block, the near-duplicate check
  of a passage and a consolidation's write are serialised per scope across workers, as
  SQLite's single writer serialises them; other scopes proceed in parallel.
- Archival search finds candidates with the GIN-indexed ``tsvector`` and ranks them with
  BM25 in Python (PostgreSQL's ``ts_rank`` has no inverse document frequency). With an
  :class:`Embedder`, it is fused with vector similarity: pgvector's ``<=>`` when the server
  has the extension, otherwise cosine over the stored float blobs in Python, as in SQLite
  (a one-time notice says so).
- Transcripts waiting for consolidation live in ``pending_consolidations`` rather than in a
  local folder, so any worker retries any failed one; a worker claims work with
  ``FOR UPDATE SKIP LOCKED`` and a lease (:class:`PgPendingQueue`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import math
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retinue.memory.base import ConsolidationOptions, NewPassage, check_passage
from retinue.memory.common import (
    NEAR_DUPLICATE,
    StoreCommon,
    appending,
    check_size,
    fuse,
    is_near_duplicate,
    ordered_blocks,
    rebase,
    replacing,
)
from retinue.memory.embeddings import VECTOR_SCAN_LIMIT, Embedder, pack, top_by_cosine
from retinue.memory.pending import PendingTranscript
from retinue.memory.store import DEFAULT_BLOCK_LIMITS, SHARED_SCOPE, Block, Passage
from retinue.memory.text import normalize
from retinue.messages import Message, from_dict, to_dict
from retinue.store.media import DEFAULT_MEDIA_MAX_BYTES
from retinue.store.postgres import PostgresStore, describe_url
from retinue.store.text import pg_text

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = ["PgPendingQueue", "PostgresMemory", "describe_url", "pg_text"]

log = logging.getLogger("retinue.memory")

_CANDIDATES = 1000  # passages one full-text search ranks at most (the newest that match)
_BM25_K1 = 1.2
_BM25_B = 0.75
_MAX_TERMS = 64
_CLAIM_SECONDS = 300.0  # the lease of a worker on a transcript it is retrying


def _hash(text: str) -> str:
    return hashlib.sha256(normalize(text).encode()).hexdigest()


def _terms(text: str) -> list[str]:
    return list(dict.fromkeys(normalize(text).split()))[:_MAX_TERMS]


def _tsquery(words: Sequence[str]) -> str:
    """A ``websearch_to_tsquery`` text matching any of ``words`` (never a syntax error)."""
    return " or ".join(f'"{w}"' for w in words)


class PostgresMemory(PostgresStore, StoreCommon):
    """Memory for every ``(tenant, role)`` scope in one PostgreSQL database, on a
    :class:`~retinue.store.postgres.PostgresStore` (its pool, and the other records)."""

    def __init__(
        self,
        url: str,
        *,
        embedder: Embedder | None = None,
        block_limits: Mapping[str, int] = DEFAULT_BLOCK_LIMITS,
        options: ConsolidationOptions | None = None,
        pool_size: int = 10,
        media_max_bytes: int = DEFAULT_MEDIA_MAX_BYTES,
    ) -> None:
        PostgresStore.__init__(self, url, pool_size=pool_size, media_max_bytes=media_max_bytes)
        self.embedder = embedder
        self.block_limits = dict(block_limits)
        self.options = options or ConsolidationOptions()
        self.pending = PgPendingQueue(self)
        self._vector_notice = False

    # -- plumbing ---------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _tx(self, tenant: str, role: str) -> AsyncIterator[AsyncConnection]:
        """One write transaction holding the scope's advisory lock."""
        async with self.connection() as conn, conn.transaction():
            await _lock(conn, tenant, role)
            yield conn

    # -- core blocks ------------------------------------------------------------------

    async def blocks(self, tenant: str, role: str) -> list[Block]:
        return ordered_blocks(self.block_limits, await self._stored(tenant, role))

    async def _stored(self, tenant: str, scope: str) -> dict[str, tuple[str, int]]:
        rows = await self._read(
            "SELECT name, value, version FROM blocks WHERE tenant = %s AND role = %s",
            (tenant, scope),
        )
        return {str(n): (str(v), int(ver)) for n, v, ver in rows}

    async def set_block(self, tenant: str, role: str, name: str, value: str) -> Block:
        return await self._update_block(tenant, role, name, lambda _: value)

    async def append_block(self, tenant: str, role: str, name: str, content: str) -> Block:
        return await self._update_block(tenant, role, name, appending(content))

    async def replace_in_block(
        self, tenant: str, role: str, name: str, old: str, new: str
    ) -> Block:
        return await self._update_block(tenant, role, name, replacing(name, old, new))

    async def _update_block(
        self, tenant: str, role: str, name: str, change: Callable[[str], str]
    ) -> Block:
        return await self._edit(tenant, role, name, change, self._limit(name))

    async def _edit(
        self, tenant: str, scope: str, name: str, change: Callable[[str], str], limit: int
    ) -> Block:
        async with self._tx(tenant, scope) as conn:
            current, _ = await _read_block(conn, tenant, scope, name)
            value = pg_text(change(current))
            check_size(name, value, limit)
            version = await _write_block(conn, tenant, scope, name, value)
        return Block(name, value, limit, version)

    # -- archival passages ------------------------------------------------------------

    async def insert_passage(
        self, tenant: str, role: str, content: str, *, source: str = "agent"
    ) -> Passage | None:
        content = content.strip()
        check_passage(content)
        vectors = await self.embed([content])
        added = await self.insert_passages(
            tenant, role, [NewPassage(content, source, vectors[0] if vectors else None)]
        )
        return added[0] if added else None

    async def insert_passages(
        self, tenant: str, role: str, items: Sequence[NewPassage], *, near_duplicates: bool = True
    ) -> list[Passage]:
        """Insert passages in one transaction, skipping (near-)duplicates of stored ones."""
        async with self._tx(tenant, role) as conn:
            return await self._insert(conn, tenant, role, items, near_duplicates)

    async def _insert(
        self,
        conn: AsyncConnection,
        tenant: str,
        role: str,
        items: Sequence[NewPassage],
        near_duplicates: bool,
    ) -> list[Passage]:
        out: list[Passage] = []
        for item in items:
            content = pg_text(item.content).strip()
            if not content or (
                near_duplicates and await _has_near_duplicate(conn, tenant, role, content)
            ):
                continue
            now = time.time()
            vector = item.vector
            columns = "tenant, role, content, norm_hash, source, created_at, embedding, tsv"
            values = "%s, %s, %s, %s, %s, %s, %s, to_tsvector('simple', %s)"
            params: list[object] = [
                tenant, role, content, _hash(content), pg_text(item.source), now,
                pack(vector) if vector is not None else None, normalize(content),
            ]  # fmt: skip
            if self.pgvector and vector is not None:
                columns += ", embedding_vec"
                values += ", %s::vector"
                params.append(_vector_literal(vector))
            cur = await conn.execute(
                f"INSERT INTO passages ({columns}) VALUES ({values}) "  # pyright: ignore[reportArgumentType]
                "ON CONFLICT DO NOTHING RETURNING id",
                params,
            )
            row = await cur.fetchone()
            if row is not None:
                out.append(Passage(int(row[0]), content, item.source, now))
        return out

    async def passage_count(self, tenant: str, role: str) -> int:
        rows = await self._read(
            "SELECT count(*) FROM passages WHERE tenant = %s AND role = %s", (tenant, role)
        )
        return int(rows[0][0])

    async def search(self, tenant: str, role: str, query: str, limit: int = 5) -> list[Passage]:
        """Best passages for ``query``: BM25, fused with vector similarity if embeddings are on."""
        limit = max(1, min(limit, 100))
        vectors = await self.embed([query]) if query.strip() else None
        text_hits = await self._full_text(tenant, role, query, limit * 4 if vectors else limit)
        if not vectors:
            return text_hits[:limit]
        vec_ids = await self._nearest(tenant, role, vectors[0], limit * 4)
        return await self._fuse(tenant, role, text_hits, vec_ids, limit)

    async def _full_text(self, tenant: str, role: str, query: str, limit: int) -> list[Passage]:
        terms = _terms(query)
        if not terms:
            return []
        rows = await self._read(
            "SELECT id, content, source, created_at FROM passages "
            "WHERE tenant = %s AND role = %s AND tsv @@ websearch_to_tsquery('simple', %s) "
            "ORDER BY id DESC LIMIT %s",
            (tenant, role, _tsquery(terms), _CANDIDATES),
        )
        total = await self.passage_count(tenant, role) if rows else 0
        scores = bm25(terms, [normalize(r[1]).split() for r in rows], total)
        ranked = sorted(zip(rows, scores, strict=True), key=lambda t: t[1], reverse=True)
        return [Passage(r[0], r[1], r[2], r[3], s) for r, s in ranked[:limit] if s > 0]

    async def _nearest(
        self, tenant: str, role: str, vector: Sequence[float], limit: int
    ) -> list[int]:
        if self.pgvector:
            rows = await self._read(
                "SELECT id FROM passages WHERE tenant = %s AND role = %s "
                "AND embedding_vec IS NOT NULL ORDER BY embedding_vec <=> %s::vector LIMIT %s",
                (tenant, role, _vector_literal(vector), limit),
            )
            return [int(r[0]) for r in rows]
        if not self._vector_notice:
            self._vector_notice = True
            log.warning(
                "pgvector is not installed on %s: vector search ranks the newest %d passages "
                "of a scope in Python (install the 'vector' extension to search them all)",
                self.where, VECTOR_SCAN_LIMIT,
            )  # fmt: skip
        rows = await self._read(
            "SELECT id, embedding FROM passages WHERE tenant = %s AND role = %s "
            "AND embedding IS NOT NULL ORDER BY id DESC LIMIT %s",
            (tenant, role, VECTOR_SCAN_LIMIT),
        )
        blobs = [(int(pid), bytes(blob)) for pid, blob in rows]
        return [pid for pid, _ in await asyncio.to_thread(top_by_cosine, vector, blobs, limit)]

    async def _fuse(
        self, tenant: str, role: str, text_hits: list[Passage], vec_ids: list[int], limit: int
    ) -> list[Passage]:
        """Reciprocal-rank fusion of the full-text and the vector rankings."""
        best = fuse(([p.id for p in text_hits], vec_ids), limit)
        rows = await self._read(
            "SELECT id, content, source, created_at FROM passages "
            "WHERE tenant = %s AND role = %s AND id = ANY(%s)",
            (tenant, role, [pid for pid, _ in best]),
        )
        by_id = {int(r[0]): r for r in rows}
        return [
            Passage(pid, by_id[pid][1], by_id[pid][2], by_id[pid][3], score)
            for pid, score in best
            if pid in by_id
        ]

    # -- the Memory protocol ----------------------------------------------------------

    async def apply_consolidation(
        self,
        *,
        run_id: str,
        tenant: str,
        role: str,
        session_id: str,
        block_updates: Mapping[str, str],
        passages: Sequence[NewPassage],
        base: Mapping[str, Block] | None = None,
        shared_updates: Mapping[str, str] | None = None,
    ) -> tuple[int, int] | None:
        """Write one consolidation in one transaction (see ``SQLiteMemory.apply_consolidation``).

        It holds the role's advisory lock, and the shared scope's too when it writes shared
        blocks (always taken second, so two consolidations cannot wait on each other)."""
        writes = [(role, n, pg_text(v)) for n, v in block_updates.items()]
        writes += [(SHARED_SCOPE, n, pg_text(v)) for n, v in (shared_updates or {}).items()]
        for scope, name, value in writes:
            self.check_stored_block(scope, name, value)
        async with self._tx(tenant, role) as conn:
            if shared_updates:
                await _lock(conn, tenant, SHARED_SCOPE)
            seen = await conn.execute("SELECT 1 FROM consolidations WHERE run_id = %s", (run_id,))
            if await seen.fetchone():
                return None
            for scope, name, value in writes:
                merged = await _rebase(conn, tenant, scope, name, value, (base or {}).get(name))
                await _write_block(conn, tenant, scope, name, merged)
            added = await self._insert(conn, tenant, role, passages, True)
            await conn.execute(
                "INSERT INTO consolidations VALUES (%s, %s, %s, %s, %s, %s, %s)",
                (run_id, tenant, role, session_id, time.time(), len(writes), len(added)),
            )
        return len(writes), len(added)


async def _rebase(
    conn: AsyncConnection, tenant: str, scope: str, name: str, value: str, base: Block | None
) -> str:
    """``value`` if the block is unchanged since ``base``, else merged into it."""
    if base is None:
        return value
    current, version = await _read_block(conn, tenant, scope, name)
    return rebase(name, value, base, current, version, base.limit)


async def _lock(conn: AsyncConnection, tenant: str, scope: str) -> None:
    """Hold the advisory lock of ``(tenant, scope)`` until the transaction ends."""
    await conn.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"{len(tenant)}:{tenant}{scope}",)
    )


def _vector_literal(vector: Sequence[float]) -> str:
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


def bm25(terms: Sequence[str], docs: Sequence[Sequence[str]], total: int) -> list[float]:
    """Okapi BM25 of each tokenised doc for ``terms`` (FTS5's formula; ``total`` docs in all)."""
    if not docs:
        return []
    avg = sum(len(d) for d in docs) / len(docs) or 1.0
    counts = [{t: d.count(t) for t in terms} for d in docs]
    df = {t: sum(1 for c in counts if c[t]) for t in terms}
    n = max(total, len(docs))
    idf = {t: max(1e-6, math.log((n - df[t] + 0.5) / (df[t] + 0.5))) for t in terms}
    out = []
    for d, c in zip(docs, counts, strict=True):
        norm = _BM25_K1 * (1 - _BM25_B + _BM25_B * len(d) / avg)
        out.append(sum(idf[t] * c[t] * (_BM25_K1 + 1) / (c[t] + norm) for t in terms if c[t]))
    return out


async def _read_block(conn: AsyncConnection, tenant: str, role: str, name: str) -> tuple[str, int]:
    cur = await conn.execute(
        "SELECT value, version FROM blocks WHERE tenant = %s AND role = %s AND name = %s",
        (tenant, role, name),
    )
    row = await cur.fetchone()
    return (str(row[0]), int(row[1])) if row else ("", 0)


async def _write_block(conn: AsyncConnection, tenant: str, role: str, name: str, value: str) -> int:
    """Write the block and bump its version; the new version."""
    cur = await conn.execute(
        "INSERT INTO blocks (tenant, role, name, value, updated_at, version) "
        "VALUES (%s, %s, %s, %s, %s, 1) "
        "ON CONFLICT (tenant, role, name) DO UPDATE SET value = excluded.value, "
        "updated_at = excluded.updated_at, version = blocks.version + 1 RETURNING version",
        (tenant, role, name, value, time.time()),
    )
    row = await cur.fetchone()
    assert row is not None
    return int(row[0])


async def _has_near_duplicate(conn: AsyncConnection, tenant: str, role: str, content: str) -> bool:
    """Whether a stored passage of the scope shares (almost) all words with ``content``.

    A passage with Jaccard similarity >= t misses at most ``(1 - t) * n`` of the ``n`` words
    of ``content``, so it contains one of any ``floor((1 - t) * n) + 1`` of them; the longest
    ones (likely the rarest) are searched, through the GIN index.
    """
    words = set(normalize(content).split())
    probe = sorted(words, key=lambda w: (-len(w), w))[: int((1 - NEAR_DUPLICATE) * len(words)) + 1]
    if not probe:
        return False
    cur = await conn.execute(
        "SELECT content FROM passages WHERE tenant = %s AND role = %s "
        "AND tsv @@ websearch_to_tsquery('simple', %s) ORDER BY id DESC LIMIT 500",
        (tenant, role, _tsquery(probe)),
    )
    rows = await cur.fetchall()
    return is_near_duplicate(words, (set(normalize(str(other)).split()) for (other,) in rows))


class PgPendingQueue:
    """The retry queue in ``pending_consolidations``: the database twin of ``PendingStore``.

    A transcript is written before the model call (``inflight``), deleted after the commit,
    and marked failed when the consolidation gives up. :meth:`ready` *claims* what is due
    (failed ones, and inflight ones untouched for ``stale_after`` seconds, whose worker must
    be gone) with ``FOR UPDATE SKIP LOCKED`` and a lease, so two workers never retry the same
    transcript and a worker that dies while retrying releases it when the lease runs out.
    A transcript is named by a path ``postgresql/pending_consolidations/<run_id>``.
    """

    root = Path("postgresql", "pending_consolidations")

    def __init__(self, store: PostgresMemory) -> None:
        self.store = store

    async def write_inflight(
        self,
        *,
        run_id: str,
        tenant: str,
        role: str,
        session_id: str,
        model: str,
        messages: Sequence[Message],
    ) -> Path:
        data = pg_text(json.dumps([to_dict(m) for m in messages], ensure_ascii=False))
        async with self.store.connection() as conn:
            await conn.execute(
                "INSERT INTO pending_consolidations "
                "(run_id, tenant, role, session_id, model, messages, created_at) "
                "VALUES (%s, %s, %s, %s, %s, %s::jsonb, %s) ON CONFLICT (run_id) DO UPDATE "
                "SET touched_at = now()",
                (run_id, tenant, role, session_id, model, data, time.time()),
            )
        return self.root / run_id

    async def mark_failed(self, path: Path, error: str) -> Path:
        async with self.store.connection() as conn:
            await conn.execute(
                "UPDATE pending_consolidations SET failed = true, error = %s, "
                "claimed_until = NULL, touched_at = now() WHERE run_id = %s",
                (pg_text(error), path.name),
            )
        return path

    async def remove(self, path: Path) -> None:
        async with self.store.connection() as conn:
            await conn.execute("DELETE FROM pending_consolidations WHERE run_id = %s", (path.name,))

    async def ready(self, *, stale_after: float = 3600.0) -> list[PendingTranscript]:
        """Claim the transcripts due for a retry (at most 100 per call)."""
        async with self.store.connection() as conn:
            cur = await conn.execute(
                "UPDATE pending_consolidations "
                "SET claimed_until = now() + make_interval(secs => %s) "
                "WHERE run_id IN (SELECT run_id FROM pending_consolidations "
                "WHERE (claimed_until IS NULL OR claimed_until < now()) "
                "AND (failed OR touched_at <= now() - make_interval(secs => %s)) "
                "ORDER BY created_at LIMIT 100 FOR UPDATE SKIP LOCKED) "
                "RETURNING run_id, tenant, role, session_id, model, messages, error",
                (max(_CLAIM_SECONDS, stale_after), stale_after),
            )
            rows = await cur.fetchall()
        return [self._transcript(r) for r in rows]

    def _transcript(self, row: Sequence[Any]) -> PendingTranscript:
        run_id, tenant, role, session_id, model, messages, error = row
        return PendingTranscript(
            run_id, tenant, role, session_id, model,
            [from_dict(m) for m in messages], self.root / run_id, error,
        )  # fmt: skip

    async def count(self) -> int:
        """Transcripts waiting, claimed or not."""
        async with self.store.connection() as conn:
            cur = await conn.execute("SELECT count(*) FROM pending_consolidations")
            row = await cur.fetchone()
        return int(row[0]) if row else 0
