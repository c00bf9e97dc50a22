"""Moving memory between stores (SQLite and PostgreSQL) as JSON lines, tenant by tenant.

:func:`export_lines` writes a header line, then every tenant's records in turn: core blocks,
archival passages (with their source, time and embedding), applied consolidations (so a
retry of a committed run stays a no-op after the move) and stored conversations.
:func:`import_lines` reads them back into any store: blocks are overwritten (a new
version), passages already present (same normalised text) are skipped, so importing twice
changes nothing. Every line is checked (:class:`Record`) and bounded in size; a bad one is
an error naming its line. A passage over :data:`~retinue.memory.base.MAX_PASSAGE_CHARS` (the
memory tools' bound: similar passages go into every consolidation request of their role) is
refused, named by its line in :attr:`ImportCounts.refused`, and the rest is imported.
Transcripts waiting for a retry are not moved: run ``retinue memory retry`` before moving.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import sqlite3
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import pydantic

from retinue.errors import MemoryStoreError
from retinue.memory.base import check_passage
from retinue.memory.embeddings import unpack
from retinue.memory.postgres import PostgresMemory
from retinue.memory.sqlite import SQLiteMemory, normalize
from retinue.messages import from_dict, to_dict
from retinue.store.text import pg_text

__all__ = ["FORMAT", "MAX_LINE", "ImportCounts", "Record", "export_lines", "import_lines"]

FORMAT = "retinue-memory/1"
MAX_LINE = 16 * 1024 * 1024  # characters in one line (a long conversation is one line)

Store = SQLiteMemory | PostgresMemory


class _Strict(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", strict=True)


class Header(_Strict):
    kind: Literal["header"]
    format: Literal["retinue-memory/1"]


class BlockRecord(_Strict):
    kind: Literal["block"]
    tenant: str
    role: str
    name: str
    value: str


class PassageRecord(_Strict):
    kind: Literal["passage"]
    tenant: str
    role: str
    content: Annotated[str, pydantic.Field(min_length=1)]
    source: str
    created_at: float
    embedding: str | None = None  # base64 of float32 values


class ConsolidationRecord(_Strict):
    kind: Literal["consolidation"]
    tenant: str
    role: str
    run_id: str
    session_id: str
    at: float
    blocks_updated: int
    passages_added: int


class ConversationRecord(_Strict):
    kind: Literal["conversation"]
    tenant: str
    id: str
    messages: list[dict[str, Any]]


Record = Annotated[
    Header | BlockRecord | PassageRecord | ConsolidationRecord | ConversationRecord,
    pydantic.Field(discriminator="kind"),
]
_RECORD: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(Record)


@dataclass(slots=True)
class ImportCounts:
    """What an import wrote, per kind (skipped: passages already there, other tenants;
    refused: one line per record not imported, saying which and why)."""

    written: dict[str, int] = field(default_factory=dict[str, int])
    skipped: int = 0
    refused: list[str] = field(default_factory=list[str])

    def add(self, kind: str) -> None:
        self.written[kind] = self.written.get(kind, 0) + 1


# -- one SQL dialect for both stores ---------------------------------------------------------


class _Db:
    """Runs ``?``-placeholder SQL on either store (PostgreSQL gets ``%s``)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def rows(self, sql: str, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        store = self.store
        if isinstance(store, SQLiteMemory):
            return await asyncio.to_thread(_sqlite_rows, store, sql, params)
        async with store.connection() as conn:
            cur = await conn.execute(sql.replace("?", "%s"), params)  # pyright: ignore[reportArgumentType]
            return await cur.fetchall()

    async def write(self, statements: Sequence[tuple[str, Sequence[object]]]) -> list[int]:
        """Run ``statements`` in one transaction; the row count of each."""
        store = self.store
        if isinstance(store, SQLiteMemory):
            return await asyncio.to_thread(_sqlite_write, store, statements)
        counts = []
        async with store.connection() as conn, conn.transaction():
            for sql, params in statements:
                cur = await conn.execute(sql.replace("?", "%s"), params)  # pyright: ignore[reportArgumentType]
                counts.append(cur.rowcount)
        return counts


def _sqlite_rows(store: SQLiteMemory, sql: str, params: Sequence[object]) -> list[tuple[Any, ...]]:
    with sqlite3.connect(store.path, timeout=30.0) as conn:
        return conn.execute(sql, params).fetchall()


def _sqlite_write(
    store: SQLiteMemory, statements: Sequence[tuple[str, Sequence[object]]]
) -> list[int]:
    conn = sqlite3.connect(store.path, isolation_level=None, timeout=30.0)
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            counts = [conn.execute(sql, params).rowcount for sql, params in statements]
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return counts
    except sqlite3.Error as exc:
        raise MemoryStoreError(f"memory import failed: {exc}") from None
    finally:
        conn.close()


# -- export ------------------------------------------------------------------------------


async def export_lines(store: Store, tenant: str | None = None) -> AsyncIterator[str]:
    """The store's memory as JSON lines (one tenant, or all of them in name order)."""
    db = _Db(store)
    yield _line({"kind": "header", "format": FORMAT})
    tenants = [tenant] if tenant is not None else await _tenants(db)
    for t in tenants:
        for role, name, value in await db.rows(
            "SELECT role, name, value FROM blocks WHERE tenant = ? ORDER BY role, name", (t,)
        ):
            yield _line({"kind": "block", "tenant": t, "role": role, "name": name, "value": value})
        for role, content, source, created_at, blob in await db.rows(
            "SELECT role, content, source, created_at, embedding FROM passages "
            "WHERE tenant = ? ORDER BY id",
            (t,),
        ):
            vector = base64.b64encode(bytes(blob)).decode() if blob is not None else None
            yield _line({
                "kind": "passage", "tenant": t, "role": role, "content": content,
                "source": source, "created_at": created_at, "embedding": vector,
            })  # fmt: skip
        for row in await db.rows(
            "SELECT role, run_id, session_id, at, blocks_updated, passages_added "
            "FROM consolidations WHERE tenant = ? ORDER BY at, run_id",
            (t,),
        ):
            keys = ("role", "run_id", "session_id", "at", "blocks_updated", "passages_added")
            yield _line({"kind": "consolidation", "tenant": t, **dict(zip(keys, row, strict=True))})
        for summary in reversed(await store.conversations.summaries(t, limit=1_000_000)):
            messages = await store.conversations.load(t, summary.id) or []
            yield _line({
                "kind": "conversation", "tenant": t, "id": summary.id,
                "messages": [to_dict(m) for m in messages],
            })  # fmt: skip


async def _tenants(db: _Db) -> list[str]:
    rows = await db.rows(
        "SELECT tenant FROM blocks UNION SELECT tenant FROM passages "
        "UNION SELECT tenant FROM consolidations UNION SELECT tenant FROM conversations"
    )
    return sorted(str(r[0]) for r in rows)


def _line(data: dict[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False)


# -- import ------------------------------------------------------------------------------


async def import_lines(
    store: Store, lines: Iterable[str], tenant: str | None = None
) -> ImportCounts:
    """Write the records of ``lines`` (an export) into ``store``; only ``tenant``'s if given."""
    db = _Db(store)
    counts = ImportCounts()
    seen_header = False
    for number, text in enumerate(lines, 1):
        if not text.strip():
            continue
        record = _parse(number, text)
        if isinstance(record, Header):
            seen_header = True
            continue
        if not seen_header:
            raise MemoryStoreError(f"line {number}: not a Retinue memory export (no header)")
        if tenant is not None and record.tenant != tenant:
            counts.skipped += 1
            continue
        if isinstance(record, PassageRecord) and (problem := _passage_problem(record)):
            counts.refused.append(
                f"line {number}: a passage of role {record.role!r} (tenant {record.tenant!r}) "
                f"was not imported: {problem}"
            )
            continue
        if await _write(store, db, record, number):
            counts.add(record.kind)
        else:
            counts.skipped += 1
    if not seen_header:
        raise MemoryStoreError("not a Retinue memory export (empty input)")
    return counts


def _passage_problem(record: PassageRecord) -> str | None:
    """Why the passage cannot be stored (empty, too long), or None."""
    try:
        check_passage(pg_text(record.content).strip())
    except MemoryStoreError as exc:
        return str(exc)
    return None


def _parse(number: int, text: str) -> Any:
    if len(text) > MAX_LINE:
        raise MemoryStoreError(f"line {number}: longer than {MAX_LINE} characters")
    try:
        return _RECORD.validate_json(text)
    except pydantic.ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        raise MemoryStoreError(f"line {number}: {where}: {first['msg']}") from None


async def _write(store: Store, db: _Db, record: Any, number: int) -> bool:
    """Write one record; False when it was already there."""
    if isinstance(record, BlockRecord):
        store.check_stored_block(record.role, record.name, record.value)
        await db.write([(
            "INSERT INTO blocks (tenant, role, name, value, updated_at, version) "
            "VALUES (?, ?, ?, ?, ?, 1) ON CONFLICT (tenant, role, name) DO UPDATE SET "
            "value = excluded.value, updated_at = excluded.updated_at, "
            "version = blocks.version + 1",
            (record.tenant, record.role, record.name, pg_text(record.value), time.time()),
        )])  # fmt: skip
        return True
    if isinstance(record, PassageRecord):
        return await _write_passage(store, db, record, number)
    if isinstance(record, ConsolidationRecord):
        (n,) = await db.write([(
            "INSERT INTO consolidations VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (record.run_id, record.tenant, record.role, record.session_id, record.at,
             record.blocks_updated, record.passages_added),
        )])  # fmt: skip
        return n > 0
    assert isinstance(record, ConversationRecord)
    try:
        messages = [from_dict(m) for m in record.messages]
    except (ValueError, KeyError, TypeError) as exc:
        problem = f"line {number}: a message of conversation {record.id!r} is invalid: {exc}"
        raise MemoryStoreError(problem) from None
    await store.conversations.save(record.tenant, record.id, messages)
    return True


async def _write_passage(store: Store, db: _Db, record: PassageRecord, number: int) -> bool:
    blob = None
    if record.embedding is not None:
        try:
            blob = base64.b64decode(record.embedding, validate=True)
        except ValueError:
            raise MemoryStoreError(f"line {number}: embedding is not base64") from None
        if len(blob) % 4:
            raise MemoryStoreError(f"line {number}: embedding is not float32 values")
    content = pg_text(record.content).strip()
    norm_hash = hashlib.sha256(normalize(content).encode()).hexdigest()
    values = [record.tenant, record.role, content, norm_hash, record.source, record.created_at]
    if isinstance(store, SQLiteMemory):
        sql = (
            "INSERT INTO passages (tenant, role, content, norm_hash, source, created_at, "
            "embedding) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING"
        )
        (n,) = await db.write([(sql, [*values, blob])])
        return n > 0
    await store.pool()  # now it knows whether pgvector is there
    columns, marks = "embedding, tsv", "?, to_tsvector('simple', ?)"
    params = [*values, blob, normalize(content)]
    if store.pgvector and blob is not None:
        columns, marks = columns + ", embedding_vec", marks + ", ?::vector"
        params.append("[" + ",".join(repr(x) for x in unpack(blob)) + "]")
    sql = (
        "INSERT INTO passages (tenant, role, content, norm_hash, source, created_at, "
        f"{columns}) VALUES (?, ?, ?, ?, ?, ?, {marks}) ON CONFLICT DO NOTHING"
    )
    (n,) = await db.write([(sql, params)])
    return n > 0
