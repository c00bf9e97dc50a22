"""The PostgreSQL schema (memory's tables and the store's), as migrations versioned in code.

The table ``retinue_migrations`` holds one row per migration applied. :func:`migrate` runs
under a transaction-scoped advisory lock, so several workers starting at once apply each
migration exactly once; a database written by a newer Retinue is refused rather than
damaged. Full-text search uses a ``tsvector`` column with a GIN index, built from the passage's
normalised words (the ``simple`` configuration: no stemming, any language), so the database
and Python split text into the same words. pgvector is optional and set up
outside the numbered migrations (:func:`enable_pgvector`), since the extension may be
missing on the server.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, LiteralString

from retinue.errors import MemoryStoreError

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "enable_pgvector", "migrate"]

log = logging.getLogger("retinue.memory")

_LOCK_KEY = 0x7265_7469_6E75_65  # "retinue": the advisory lock taken while migrating

_V1 = (
    """CREATE TABLE IF NOT EXISTS blocks (
        tenant TEXT NOT NULL,
        role TEXT NOT NULL,
        name TEXT NOT NULL,
        value TEXT NOT NULL,
        version BIGINT NOT NULL DEFAULT 0,
        updated_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (tenant, role, name)
    )""",
    """CREATE TABLE IF NOT EXISTS passages (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        tenant TEXT NOT NULL,
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        norm_hash TEXT NOT NULL,
        source TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        embedding BYTEA,
        tsv TSVECTOR NOT NULL,
        UNIQUE (tenant, role, norm_hash)
    )""",
    "CREATE INDEX IF NOT EXISTS passages_tsv ON passages USING GIN (tsv)",
    "CREATE INDEX IF NOT EXISTS passages_scope ON passages (tenant, role, id)",
    """CREATE TABLE IF NOT EXISTS consolidations (
        run_id TEXT PRIMARY KEY,
        tenant TEXT NOT NULL,
        role TEXT NOT NULL,
        session_id TEXT NOT NULL,
        at DOUBLE PRECISION NOT NULL,
        blocks_updated INTEGER NOT NULL,
        passages_added INTEGER NOT NULL
    )""",
    # The retry queue: a transcript is kept here from before the model call until the
    # commit; ``claimed_until`` is the lease of the worker handling it (NULL: free).
    """CREATE TABLE IF NOT EXISTS pending_consolidations (
        run_id TEXT PRIMARY KEY,
        tenant TEXT NOT NULL,
        role TEXT NOT NULL,
        session_id TEXT NOT NULL,
        model TEXT NOT NULL,
        messages JSONB NOT NULL,
        error TEXT NOT NULL DEFAULT '',
        failed BOOLEAN NOT NULL DEFAULT false,
        created_at DOUBLE PRECISION NOT NULL,
        touched_at TIMESTAMPTZ NOT NULL DEFAULT now(),
        claimed_until TIMESTAMPTZ
    )""",
    "CREATE INDEX IF NOT EXISTS pending_claims ON pending_consolidations (claimed_until)",
)

# v2: the main agent's conversations (one row per message), and the lease a worker holds on
# a conversation while it runs one of its turns (or keeps its sessions: ``sticky``).
_V2 = (
    """CREATE TABLE IF NOT EXISTS conversations (
        tenant TEXT NOT NULL,
        id TEXT NOT NULL,
        title TEXT NOT NULL,
        message_count INTEGER NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (tenant, id)
    )""",
    "CREATE INDEX IF NOT EXISTS conversations_by_update ON conversations (tenant, updated_at)",
    """CREATE TABLE IF NOT EXISTS conversation_messages (
        tenant TEXT NOT NULL,
        conversation TEXT NOT NULL,
        seq INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (tenant, conversation, seq)
    )""",
    """CREATE TABLE IF NOT EXISTS conversation_leases (
        tenant TEXT NOT NULL,
        id TEXT NOT NULL,
        owner TEXT NOT NULL,
        token TEXT,
        sticky BOOLEAN NOT NULL DEFAULT false,
        expires_at TIMESTAMPTZ NOT NULL,
        PRIMARY KEY (tenant, id)
    )""",
)

# v3: the approvals a conversation's main agent waits for, saved with its history (JSON).
_V3: tuple[LiteralString, ...] = (
    "ALTER TABLE conversations ADD COLUMN IF NOT EXISTS approvals TEXT NOT NULL DEFAULT '[]'",
)

# v4: the shared task list of each parent tree ("team"; retinue.store.tasks).
_V4: tuple[LiteralString, ...] = (
    """CREATE TABLE IF NOT EXISTS tasks (
        tenant TEXT NOT NULL,
        team TEXT NOT NULL,
        id INTEGER NOT NULL,
        subject TEXT NOT NULL,
        description TEXT NOT NULL,
        status TEXT NOT NULL,
        owner TEXT,
        blocked_by TEXT NOT NULL DEFAULT '[]',
        updated_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (tenant, team, id)
    )""",
)

# v5: durable sessions (retinue.store.journal): one record per session, the columns it is
# queried by plus its other fields as JSON, and its history one row per message. A load reads
# the first ``message_count`` rows only. The partial index finds turns in flight (``stale``)
# without reading the idle records kept for retention.
_V5: tuple[LiteralString, ...] = (
    """CREATE TABLE IF NOT EXISTS session_records (
        tenant TEXT NOT NULL,
        id TEXT NOT NULL,
        root TEXT NOT NULL,
        parent_id TEXT,
        depth INTEGER NOT NULL,
        kind TEXT NOT NULL,
        role TEXT NOT NULL,
        instance TEXT,
        state TEXT NOT NULL,
        message_count INTEGER NOT NULL,
        data TEXT NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (tenant, id)
    )""",
    "CREATE INDEX IF NOT EXISTS session_records_by_root ON session_records (tenant, root)",
    "CREATE INDEX IF NOT EXISTS session_records_by_update ON session_records (updated_at)",
    "CREATE INDEX IF NOT EXISTS session_records_in_flight ON session_records (updated_at) "
    "WHERE state IN ('running', 'closing')",
    """CREATE TABLE IF NOT EXISTS session_messages (
        tenant TEXT NOT NULL,
        session TEXT NOT NULL,
        seq INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (tenant, session, seq)
    )""",
)

# v6: transcripts of ended sessions (retinue.store.transcripts): the summary's columns, the
# entries as JSON, the searchable text and its tsvector under a GIN index.
_V6: tuple[LiteralString, ...] = (
    """CREATE TABLE IF NOT EXISTS transcripts (
        tenant TEXT NOT NULL,
        id TEXT NOT NULL UNIQUE,
        session_id TEXT NOT NULL,
        parent_id TEXT,
        role TEXT NOT NULL,
        kind TEXT NOT NULL,
        depth INTEGER NOT NULL,
        turns INTEGER NOT NULL,
        tool_calls INTEGER NOT NULL,
        input_tokens BIGINT NOT NULL,
        output_tokens BIGINT NOT NULL,
        cache_read_tokens BIGINT NOT NULL,
        requests INTEGER NOT NULL,
        cost_usd DOUBLE PRECISION,
        outcome TEXT NOT NULL,
        started_at DOUBLE PRECISION NOT NULL,
        ended_at DOUBLE PRECISION NOT NULL,
        message_count INTEGER NOT NULL,
        body TEXT NOT NULL,
        text TEXT NOT NULL,
        tsv TSVECTOR NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS transcripts_by_end ON transcripts (tenant, ended_at)",
    "CREATE INDEX IF NOT EXISTS transcripts_by_parent ON transcripts (tenant, parent_id)",
    "CREATE INDEX IF NOT EXISTS transcripts_ended ON transcripts (ended_at)",
    "CREATE INDEX IF NOT EXISTS transcripts_tsv ON transcripts USING GIN (tsv)",
)

# v7: images and PDFs of stored conversations, out of their rows (retinue.store.pg_media).
_V7: tuple[LiteralString, ...] = (
    """CREATE TABLE IF NOT EXISTS conversation_media (
        sha256 TEXT PRIMARY KEY,
        size BIGINT NOT NULL,
        data BYTEA NOT NULL
    )""",
)

# v8: content kept by reference for Temporal's payloads (retinue.store.blobs), per tenant.
_V8: tuple[LiteralString, ...] = (
    """CREATE TABLE IF NOT EXISTS blobs (
        tenant TEXT NOT NULL,
        sha256 TEXT NOT NULL,
        size BIGINT NOT NULL,
        data BYTEA NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (tenant, sha256)
    )""",
)

# v9: when each blob was last used (put or read), for the sweep of those long unused
# (retinue.store.blobs); the blobs kept before it count as used now.
_V9: tuple[LiteralString, ...] = (
    "ALTER TABLE blobs ADD COLUMN IF NOT EXISTS used_at DOUBLE PRECISION NOT NULL"
    " DEFAULT extract(epoch FROM now())",
    "CREATE INDEX IF NOT EXISTS blobs_by_use ON blobs (used_at)",
)

MIGRATIONS: tuple[tuple[LiteralString, ...], ...] = (_V1, _V2, _V3, _V4, _V5, _V6, _V7, _V8, _V9)
SCHEMA_VERSION = len(MIGRATIONS)


async def migrate(conn: AsyncConnection) -> None:
    """Bring the database up to :data:`SCHEMA_VERSION` (``conn`` in autocommit mode)."""
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS retinue_migrations "
            "(version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        row = await (await conn.execute("SELECT max(version) FROM retinue_migrations")).fetchone()
        version = int(row[0]) if row and row[0] is not None else 0
        if version > SCHEMA_VERSION:
            raise MemoryStoreError(
                f"memory database schema v{version} is newer than this Retinue "
                f"(v{SCHEMA_VERSION}); upgrade Retinue"
            )
        for number in range(version, SCHEMA_VERSION):
            for statement in MIGRATIONS[number]:
                await conn.execute(statement)
            await conn.execute(
                "INSERT INTO retinue_migrations (version) VALUES (%s)", (number + 1,)
            )


async def enable_pgvector(conn: AsyncConnection) -> bool:
    """Set up pgvector when the server has it: a ``vector`` column next to the float blob."""
    cur = await conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
    if await cur.fetchone() is None:
        return False
    try:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
            await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            await conn.execute("ALTER TABLE passages ADD COLUMN IF NOT EXISTS embedding_vec vector")
    except Exception as exc:  # no privilege to create it: stay on the fallback
        log.warning("pgvector is installed but cannot be enabled here: %s", exc)
        return False
    return True
