"""Long-term memory of agents: core blocks, archival passages, consolidation.

``open_memory(home)`` opens the embedded store (``<home>/memory.db``); the sub-agent manager
uses it through :class:`Memory`, the memory tools and the CLI through :class:`MemoryStore`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from retinue.memory.base import Memory
from retinue.memory.consolidate import ConsolidationOptions, ConsolidationResult, RetryReport
from retinue.memory.embeddings import Embedder, OpenAIEmbedder, embedder_from_env
from retinue.memory.sqlite import SQLiteMemory
from retinue.memory.store import DEFAULT_BLOCK_LIMITS, Block, MemoryStore, Passage

__all__ = [
    "DEFAULT_BLOCK_LIMITS",
    "Block",
    "ConsolidationOptions",
    "ConsolidationResult",
    "Embedder",
    "Memory",
    "MemoryStore",
    "OpenAIEmbedder",
    "Passage",
    "RetryReport",
    "SQLiteMemory",
    "open_memory",
]


def open_memory(
    home: Path,
    *,
    embedder: Embedder | None = None,
    block_limits: Mapping[str, int] = DEFAULT_BLOCK_LIMITS,
    options: ConsolidationOptions | None = None,
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
    )
