"""Long-term memory of agents: core blocks, archival passages, consolidation, embeddings.

``open_memory(home)`` opens the embedded store (``<home>/memory.db``); ``open_store(home,
database_url)`` opens :class:`PostgresMemory` instead when a ``postgresql://`` URL is given
(several workers sharing one database). The sub-agent manager uses a store through
:class:`Memory`, the memory tools and the CLI through :class:`MemoryStore`.
A :class:`SharedBlock` names a block several roles share (``Role(shared_memory=...)``).
Each backend is built on the :mod:`retinue.store` of its database (:class:`SQLiteMemory` on
``SQLiteStore``, :class:`PostgresMemory` on ``PostgresStore``), which owns the connection
and keeps what is not memory: conversations, the step journal, task lists, leases,
transcripts and media. ``SessionJournal`` and ``SessionRecord`` are exported here as a
deprecated alias of :mod:`retinue.store.journal`'s for one release.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TypeAlias

from retinue.errors import ConfigError
from retinue.memory.base import Memory
from retinue.memory.consolidate import ConsolidationOptions, ConsolidationResult, RetryReport
from retinue.memory.embeddings import Embedder, OpenAIEmbedder, embedder_from_env
from retinue.memory.postgres import PostgresMemory
from retinue.memory.sqlite import SQLiteMemory
from retinue.memory.store import DEFAULT_BLOCK_LIMITS, Block, MemoryStore, Passage, SharedBlock
from retinue.store.journal import SessionJournal, SessionRecord  # deprecated here: retinue.store
from retinue.store.media import DEFAULT_MEDIA_MAX_BYTES

__all__ = [
    "DEFAULT_BLOCK_LIMITS",
    "Block",
    "ConsolidationOptions",
    "ConsolidationResult",
    "Embedder",
    "Memory",
    "MemoryBackend",
    "MemoryStore",
    "OpenAIEmbedder",
    "Passage",
    "PostgresMemory",
    "RetryReport",
    "SQLiteMemory",
    "SessionJournal",
    "SessionRecord",
    "SharedBlock",
    "open_memory",
    "open_store",
]

MemoryBackend: TypeAlias = SQLiteMemory | PostgresMemory


def open_memory(
    home: Path,
    *,
    embedder: Embedder | None = None,
    block_limits: Mapping[str, int] = DEFAULT_BLOCK_LIMITS,
    options: ConsolidationOptions | None = None,
    media_max_bytes: int = DEFAULT_MEDIA_MAX_BYTES,
) -> SQLiteMemory:
    """The store in ``<home>/memory.db`` (transcripts in ``<home>/pending/``).

    Without ``embedder``, one is built from ``RETINUE_EMBEDDING_MODEL`` if that is set.
    """
    return SQLiteMemory(
        home / "memory.db",
        embedder=embedder or embedder_from_env(),
        block_limits=block_limits,
        pending_dir=home / "pending",
        options=options,
        media_max_bytes=media_max_bytes,
    )


def open_store(
    home: Path,
    database_url: str | None = None,
    *,
    embedder: Embedder | None = None,
    block_limits: Mapping[str, int] = DEFAULT_BLOCK_LIMITS,
    options: ConsolidationOptions | None = None,
    media_max_bytes: int = DEFAULT_MEDIA_MAX_BYTES,
) -> MemoryBackend:
    """PostgreSQL at ``database_url`` when one is given (``Settings.database_url``), else
    :func:`open_memory` (images and PDFs of conversations in ``<home>/media``, at most
    ``media_max_bytes``). The PostgreSQL store connects on first use."""
    if not database_url:
        return open_memory(
            home,
            embedder=embedder,
            block_limits=block_limits,
            options=options,
            media_max_bytes=media_max_bytes,
        )
    try:
        import psycopg_pool  # noqa: F401  (the pool comes with the driver in the extra)
    except ImportError:
        raise ConfigError(
            "database_url is set, but the PostgreSQL driver is not installed: "
            "install Retinue with the 'postgres' extra (pip install 'retinue[postgres]')"
        ) from None
    return PostgresMemory(
        database_url,
        embedder=embedder or embedder_from_env(),
        block_limits=block_limits,
        options=options,
        media_max_bytes=media_max_bytes,
    )
