"""The embedded memory store: core blocks and archival passages in one SQLite file.

Built on :class:`~retinue.store.sqlite.SQLiteStore`, which owns the connection (WAL mode,
one lock, worker threads) and keeps the other records of the same database. Archival search
is FTS5 with BM25, fused with cosine similarity when an :class:`Embedder` is configured.
Consolidation itself lives in :mod:`retinue.memory.consolidate`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
import re
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

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
from retinue.memory.pending import PendingStore
from retinue.memory.store import DEFAULT_BLOCK_LIMITS, SHARED_SCOPE, Block, Passage
from retinue.memory.text import normalize
from retinue.store.media import DEFAULT_MEDIA_MAX_BYTES
from retinue.store.sqlite import SQLiteStore
from retinue.store.text import scrub

__all__ = ["NewPassage", "SQLiteMemory", "fts_query", "normalize"]

log = logging.getLogger("retinue.memory")

_WORD = re.compile(r"\w+", re.UNICODE)


def fts_query(text: str, max_terms: int = 64) -> str:
    """An FTS5 query matching any word of ``text`` (BM25 ranks by how well), or ``""``."""
    terms = list(dict.fromkeys(_WORD.findall(text.lower())))[:max_terms]
    return " OR ".join(f'"{t}"' for t in terms)


def _hash(text: str) -> str:
    return hashlib.sha256(normalize(text).encode()).hexdigest()


class SQLiteMemory(SQLiteStore, StoreCommon):
    """Memory for every ``(tenant, role)`` scope in one SQLite database.

    Implements :class:`~retinue.memory.base.Memory` (``render``, ``consolidate``) for the
    sub-agent manager and :class:`~retinue.memory.store.MemoryStore` for tools and the CLI,
    on a :class:`~retinue.store.sqlite.SQLiteStore` (the connection, and the service's
    conversations, the journal, task lists and transcripts in the same database).
    """

    def __init__(
        self,
        path: Path,
        *,
        embedder: Embedder | None = None,
        block_limits: Mapping[str, int] = DEFAULT_BLOCK_LIMITS,
        pending_dir: Path | None = None,
        options: ConsolidationOptions | None = None,
        media_max_bytes: int = DEFAULT_MEDIA_MAX_BYTES,
    ) -> None:
        SQLiteStore.__init__(self, path, media_max_bytes=media_max_bytes)
        self.embedder = embedder
        self.block_limits = dict(block_limits)
        self.pending = PendingStore(pending_dir or path.parent / "pending")
        self.options = options or ConsolidationOptions()

    # -- core blocks ------------------------------------------------------------------

    async def blocks(self, tenant: str, role: str) -> list[Block]:
        return await asyncio.to_thread(self.blocks_sync, tenant, role)

    def blocks_sync(self, tenant: str, role: str) -> list[Block]:
        return ordered_blocks(self.block_limits, self._stored_sync(tenant, role))

    def _stored_sync(self, tenant: str, scope: str) -> dict[str, tuple[str, int]]:
        rows = self._read(
            "SELECT name, value, version FROM blocks WHERE tenant = ? AND role = ?",
            (tenant, scope),
        )
        return {n: (v, ver) for n, v, ver in rows}

    async def _stored(self, tenant: str, scope: str) -> dict[str, tuple[str, int]]:
        return await asyncio.to_thread(self._stored_sync, tenant, scope)

    async def set_block(self, tenant: str, role: str, name: str, value: str) -> Block:
        return await asyncio.to_thread(self._update_block, tenant, role, name, lambda _: value)

    async def append_block(self, tenant: str, role: str, name: str, content: str) -> Block:
        return await asyncio.to_thread(self._update_block, tenant, role, name, appending(content))

    async def replace_in_block(
        self, tenant: str, role: str, name: str, old: str, new: str
    ) -> Block:
        edit = replacing(name, old, new)
        return await asyncio.to_thread(self._update_block, tenant, role, name, edit)

    def _update_block(
        self, tenant: str, role: str, name: str, change: Callable[[str], str]
    ) -> Block:
        return self._edit_sync(tenant, role, name, change, self._limit(name))

    async def _edit(
        self, tenant: str, scope: str, name: str, change: Callable[[str], str], limit: int
    ) -> Block:
        return await asyncio.to_thread(self._edit_sync, tenant, scope, name, change, limit)

    def _edit_sync(
        self, tenant: str, scope: str, name: str, change: Callable[[str], str], limit: int
    ) -> Block:
        with self._tx() as conn:  # read and write under the write lock: no lost update
            current, _ = _read_block(conn, tenant, scope, name)
            value = scrub(change(current))
            check_size(name, value, limit)
            version = _write_block(conn, tenant, scope, name, value)
        return Block(name, value, limit, version)

    # -- archival passages ------------------------------------------------------------

    async def insert_passage(
        self, tenant: str, role: str, content: str, *, source: str = "agent"
    ) -> Passage | None:
        content = content.strip()
        check_passage(content)
        vectors = await self.embed([content])
        item = NewPassage(content, source, vectors[0] if vectors else None)
        added = await asyncio.to_thread(self.insert_passages_sync, tenant, role, [item])
        return added[0] if added else None

    def insert_passages_sync(
        self, tenant: str, role: str, items: Sequence[NewPassage], *, near_duplicates: bool = True
    ) -> list[Passage]:
        """Insert passages in one transaction, skipping (near-)duplicates of stored ones."""
        with self._tx() as conn:
            return _insert_passages(conn, tenant, role, items, near_duplicates)

    async def passage_count(self, tenant: str, role: str) -> int:
        rows = await asyncio.to_thread(
            self._read,
            "SELECT count(*) FROM passages WHERE tenant = ? AND role = ?",
            (tenant, role),
        )
        return int(rows[0][0])

    async def search(self, tenant: str, role: str, query: str, limit: int = 5) -> list[Passage]:
        """Best passages for ``query``: BM25, fused with cosine when embeddings are on."""
        limit = max(1, min(limit, 100))
        vectors = await self.embed([query]) if query.strip() else None
        return await asyncio.to_thread(
            self.search_sync, tenant, role, query, limit, vectors[0] if vectors else None
        )

    def search_sync(
        self,
        tenant: str,
        role: str,
        query: str,
        limit: int,
        vector: Sequence[float] | None = None,
    ) -> list[Passage]:
        text_hits = self._fts(tenant, role, query, limit * 4 if vector else limit)
        if vector is None:
            return text_hits[:limit]
        rows = self._read(
            "SELECT id, embedding FROM passages WHERE tenant = ? AND role = ? "
            "AND embedding IS NOT NULL ORDER BY id DESC LIMIT ?",
            (tenant, role, VECTOR_SCAN_LIMIT),
        )
        vec_ids = [pid for pid, _ in top_by_cosine(vector, rows, limit * 4)]
        return self._fuse(text_hits, vec_ids, limit)

    def _fts(self, tenant: str, role: str, query: str, limit: int) -> list[Passage]:
        match = fts_query(query)
        if not match:
            return []
        rows = self._read(
            "SELECT p.id, p.content, p.source, p.created_at, bm25(passages_fts) AS rank "
            "FROM passages_fts CROSS JOIN passages p ON p.id = passages_fts.rowid "
            "WHERE passages_fts MATCH ? AND p.tenant = ? AND p.role = ? "
            "ORDER BY rank LIMIT ?",
            (match, tenant, role, limit),
        )
        return [Passage(r[0], r[1], r[2], r[3], -r[4]) for r in rows]

    def _fuse(self, text_hits: list[Passage], vec_ids: list[int], limit: int) -> list[Passage]:
        """Reciprocal-rank fusion of the full-text and the vector rankings."""
        best = fuse(([p.id for p in text_hits], vec_ids), limit)
        if not best:
            return []
        marks = ",".join("?" * len(best))
        rows = self._read(
            f"SELECT id, content, source, created_at FROM passages WHERE id IN ({marks})",
            [pid for pid, _ in best],
        )
        by_id = {r[0]: r for r in rows}
        return [
            Passage(pid, by_id[pid][1], by_id[pid][2], by_id[pid][3], score)
            for pid, score in best
            if pid in by_id
        ]

    # -- the Memory protocol ----------------------------------------------------------

    def apply_consolidation(
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
        """Write one consolidation in one transaction: ``(blocks, passages)`` written.

        ``base`` holds the blocks as they were read before the model rewrote them (the
        role's and the shared ones, whose names differ). A block whose version has moved
        since (another consolidation, a memory tool) is not overwritten: the rewrite is
        merged line by line into its current text (:func:`merge_lines`), and
        ``BlockConflictError`` is raised when the merge does not fit the block's limit, so
        the caller reads again and asks anew. ``shared_updates`` are rewrites of shared
        blocks the role may write. ``None`` when ``run_id`` was already applied (a retry of a
        committed run).
        """
        writes = [(role, n, scrub(v)) for n, v in block_updates.items()]
        writes += [(SHARED_SCOPE, n, scrub(v)) for n, v in (shared_updates or {}).items()]
        for scope, name, value in writes:
            self.check_stored_block(scope, name, value)
        with self._tx() as conn:
            seen = conn.execute("SELECT 1 FROM consolidations WHERE run_id = ?", (run_id,))
            if seen.fetchone():
                return None
            for scope, name, value in writes:
                value = self._rebase(conn, tenant, scope, name, value, (base or {}).get(name))
                _write_block(conn, tenant, scope, name, value)
            added = _insert_passages(conn, tenant, role, passages, near_duplicates=True)
            conn.execute(
                "INSERT INTO consolidations VALUES (?, ?, ?, ?, ?, ?, ?)",
                (run_id, tenant, role, session_id, time.time(), len(writes), len(added)),
            )
        return len(writes), len(added)

    def _rebase(
        self,
        conn: sqlite3.Connection,
        tenant: str,
        scope: str,
        name: str,
        value: str,
        base: Block | None,
    ) -> str:
        """``value`` if the block is unchanged since ``base``, else merged into it."""
        if base is None:
            return value
        current, version = _read_block(conn, tenant, scope, name)
        return rebase(name, value, base, current, version, base.limit)


def _read_block(conn: sqlite3.Connection, tenant: str, role: str, name: str) -> tuple[str, int]:
    row = conn.execute(
        "SELECT value, version FROM blocks WHERE tenant = ? AND role = ? AND name = ?",
        (tenant, role, name),
    ).fetchone()
    return (row[0], row[1]) if row else ("", 0)


def _write_block(conn: sqlite3.Connection, tenant: str, role: str, name: str, value: str) -> int:
    """Write the block and bump its version; the new version."""
    row = conn.execute(
        "INSERT INTO blocks (tenant, role, name, value, updated_at, version) "
        "VALUES (?, ?, ?, ?, ?, 1) "
        "ON CONFLICT (tenant, role, name) DO UPDATE SET value = excluded.value, "
        "updated_at = excluded.updated_at, version = blocks.version + 1 RETURNING version",
        (tenant, role, name, value, time.time()),
    ).fetchone()
    return int(row[0])


def _insert_passages(
    conn: sqlite3.Connection,
    tenant: str,
    role: str,
    items: Sequence[NewPassage],
    near_duplicates: bool,
) -> list[Passage]:
    out = []
    items = [dataclasses.replace(i, content=scrub(i.content)) for i in items]
    freqs: dict[str, int] = {}
    if near_duplicates:
        words = {w for item in items for w in normalize(item.content).split()}
        freqs = _doc_freqs(conn, words)
    for item in items:
        content = item.content.strip()
        if not content or (
            near_duplicates and _has_near_duplicate(conn, tenant, role, content, freqs)
        ):
            continue
        now = time.time()
        cur = conn.execute(
            "INSERT INTO passages (tenant, role, content, norm_hash, source, created_at, "
            "embedding) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (
                tenant,
                role,
                content,
                _hash(content),
                item.source,
                now,
                pack(item.vector) if item.vector is not None else None,
            ),
        )
        if cur.rowcount == 1 and cur.lastrowid is not None:
            out.append(Passage(cur.lastrowid, content, item.source, now))
            for w in set(normalize(content).split()):
                freqs[w] = freqs.get(w, 0) + 1
    return out


def _doc_freqs(conn: sqlite3.Connection, words: set[str]) -> dict[str, int]:
    """How many stored passages (all scopes) contain each word."""
    out = {}
    for w in words:  # one lookup per word: fts5vocab turns IN (...) into a full scan
        row = conn.execute("SELECT doc FROM passages_vocab WHERE term = ?", (w,)).fetchone()
        if row:
            out[w] = row[0]
    return out


def _has_near_duplicate(
    conn: sqlite3.Connection, tenant: str, role: str, content: str, freqs: Mapping[str, int]
) -> bool:
    """Whether a stored passage of the scope shares (almost) all words with ``content``.

    A passage with Jaccard similarity >= t misses at most ``(1 - t) * n`` of the ``n`` words
    of ``content``, so it contains at least one of the ``floor((1 - t) * n) + 1`` rarest
    ones: searching for those finds every candidate while matching few passages.
    """
    words = set(normalize(content).split())
    present = sorted((w for w in words if freqs.get(w)), key=lambda w: freqs[w])
    rarest = present[: int((1 - NEAR_DUPLICATE) * len(words)) + 1]
    if not rarest:
        return False
    rows = conn.execute(
        "SELECT p.content FROM passages_fts CROSS JOIN passages p ON p.id = passages_fts.rowid "
        "WHERE passages_fts MATCH ? AND p.tenant = ? AND p.role = ? LIMIT 500",
        (" OR ".join(f'"{w}"' for w in rarest), tenant, role),
    ).fetchall()
    return is_near_duplicate(words, (set(normalize(other).split()) for (other,) in rows))
