"""The SQLite schema of the memory database (memory's tables and the store's), as migrations.

``PRAGMA user_version`` holds the number of migrations applied; :func:`migrate` applies the
missing ones, each in its own transaction, so a database written by an older Retinue is
brought up to date on open, and one written by a newer Retinue is refused rather than
damaged.
"""

from __future__ import annotations

import sqlite3

from retinue.errors import MemoryStoreError

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "migrate"]

_V1 = """
CREATE TABLE blocks (
    tenant TEXT NOT NULL,
    role TEXT NOT NULL,
    name TEXT NOT NULL,
    value TEXT NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (tenant, role, name)
) WITHOUT ROWID;

CREATE TABLE passages (
    id INTEGER PRIMARY KEY,
    tenant TEXT NOT NULL,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    norm_hash TEXT NOT NULL,
    source TEXT NOT NULL,
    created_at REAL NOT NULL,
    embedding BLOB,
    UNIQUE (tenant, role, norm_hash)
);

CREATE VIRTUAL TABLE passages_fts USING fts5(
    content, content='passages', content_rowid='id', tokenize='unicode61 remove_diacritics 2'
);

CREATE TRIGGER passages_ai AFTER INSERT ON passages BEGIN
    INSERT INTO passages_fts(rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER passages_ad AFTER DELETE ON passages BEGIN
    INSERT INTO passages_fts(passages_fts, rowid, content) VALUES ('delete', old.id, old.content);
END;

CREATE TABLE consolidations (
    run_id TEXT PRIMARY KEY,
    tenant TEXT NOT NULL,
    role TEXT NOT NULL,
    session_id TEXT NOT NULL,
    at REAL NOT NULL,
    blocks_updated INTEGER NOT NULL,
    passages_added INTEGER NOT NULL
);
"""

# v2: document frequencies of words, to find near-duplicate candidates by their rarest words.
_V2 = """
CREATE VIRTUAL TABLE passages_vocab USING fts5vocab(passages_fts, 'row');
"""

# v3: a version per core block, bumped on every write, for compare-and-set updates.
_V3 = """
ALTER TABLE blocks ADD COLUMN version INTEGER NOT NULL DEFAULT 0;
"""

# v4: the main agent's conversations (the HTTP service's chats), one row per message.
_V4 = """
CREATE TABLE conversations (
    tenant TEXT NOT NULL,
    id TEXT NOT NULL,
    title TEXT NOT NULL,
    message_count INTEGER NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (tenant, id)
) WITHOUT ROWID;

CREATE INDEX conversations_by_update ON conversations (tenant, updated_at);

CREATE TABLE conversation_messages (
    tenant TEXT NOT NULL,
    conversation TEXT NOT NULL,
    seq INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (tenant, conversation, seq)
) WITHOUT ROWID;
"""

# v5: the approvals a conversation's main agent waits for, saved with its history (JSON).
_V5 = """
ALTER TABLE conversations ADD COLUMN approvals TEXT NOT NULL DEFAULT '[]';
"""

# v6: the shared task list of each parent tree ("team"; retinue.store.tasks).
_V6 = """
CREATE TABLE tasks (
    tenant TEXT NOT NULL,
    team TEXT NOT NULL,
    id INTEGER NOT NULL,
    subject TEXT NOT NULL,
    description TEXT NOT NULL,
    status TEXT NOT NULL,
    owner TEXT,
    blocked_by TEXT NOT NULL DEFAULT '[]',
    updated_at REAL NOT NULL,
    PRIMARY KEY (tenant, team, id)
) WITHOUT ROWID;
"""

# v7: durable sessions (retinue.store.journal): one record per session, the columns it is
# queried by plus its other fields as JSON, and its history one row per message. A load reads
# the first ``message_count`` rows only. The partial index finds turns in flight (``stale``)
# without reading the idle records kept for retention.
_V7 = """
CREATE TABLE session_records (
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
    updated_at REAL NOT NULL,
    PRIMARY KEY (tenant, id)
) WITHOUT ROWID;

CREATE INDEX session_records_by_root ON session_records (tenant, root);
CREATE INDEX session_records_by_update ON session_records (updated_at);
CREATE INDEX session_records_in_flight ON session_records (updated_at)
    WHERE state IN ('running', 'closing');

CREATE TABLE session_messages (
    tenant TEXT NOT NULL,
    session TEXT NOT NULL,
    seq INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (tenant, session, seq)
) WITHOUT ROWID;
"""

# v8: transcripts of ended sessions (retinue.store.transcripts): one row per transcript,
# its summary's columns and its entries as JSON; its searchable text in an FTS5 table whose
# rowid is the transcript's.
_V8 = """
CREATE TABLE transcripts (
    tenant TEXT NOT NULL,
    id TEXT NOT NULL UNIQUE,
    session_id TEXT NOT NULL,
    parent_id TEXT,
    role TEXT NOT NULL,
    kind TEXT NOT NULL,
    depth INTEGER NOT NULL,
    turns INTEGER NOT NULL,
    tool_calls INTEGER NOT NULL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cache_read_tokens INTEGER NOT NULL,
    requests INTEGER NOT NULL,
    cost_usd REAL,
    outcome TEXT NOT NULL,
    started_at REAL NOT NULL,
    ended_at REAL NOT NULL,
    message_count INTEGER NOT NULL,
    body TEXT NOT NULL
);

CREATE INDEX transcripts_by_end ON transcripts (tenant, ended_at);
CREATE INDEX transcripts_by_parent ON transcripts (tenant, parent_id);
CREATE INDEX transcripts_ended ON transcripts (ended_at);

CREATE VIRTUAL TABLE transcripts_fts USING fts5(
    text, tokenize='unicode61 remove_diacritics 2'
);
"""

# v9: content kept by reference for Temporal's payloads (retinue.store.blobs), per tenant.
_V9 = """
CREATE TABLE blobs (
    tenant TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    size INTEGER NOT NULL,
    data BLOB NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (tenant, sha256)
);
"""

# v10: when each blob was last used (put or read), for the sweep of those long unused
# (retinue.store.blobs); the blobs kept before it count as used now.
_V10 = """
ALTER TABLE blobs ADD COLUMN used_at REAL NOT NULL DEFAULT 0;
UPDATE blobs SET used_at = (julianday('now') - 2440587.5) * 86400.0;
CREATE INDEX blobs_by_use ON blobs (used_at);
"""

MIGRATIONS: tuple[str, ...] = (_V1, _V2, _V3, _V4, _V5, _V6, _V7, _V8, _V9, _V10)
SCHEMA_VERSION = len(MIGRATIONS)


def migrate(conn: sqlite3.Connection) -> None:
    """Bring the database up to :data:`SCHEMA_VERSION` (``conn`` in autocommit mode)."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise MemoryStoreError(
            f"memory database schema v{version} is newer than this Retinue (v{SCHEMA_VERSION}); "
            "upgrade Retinue"
        )
    for number in range(version, SCHEMA_VERSION):
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Re-check under the write lock: another process may have migrated meanwhile.
            if conn.execute("PRAGMA user_version").fetchone()[0] != number:
                conn.execute("ROLLBACK")
                continue
            for statement in _statements(MIGRATIONS[number]):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {number + 1}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise


def _statements(script: str) -> list[str]:
    """Split a migration into statements (triggers keep their inner semicolons)."""
    out: list[str] = []
    current = ""
    for line in script.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            if current.strip():
                out.append(current.strip())
            current = ""
    if current.strip():
        out.append(current.strip())
    return out
