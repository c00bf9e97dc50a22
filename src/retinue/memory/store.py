"""The records of long-term memory and the :class:`MemoryStore` protocol the tools use.

A scope is one ``(tenant, role)`` pair; every method takes both, and nothing ever crosses
scopes. *Core memory* is a few named text blocks with size limits (characters), shown in the
role's system prompt on every run; *archival memory* is an unbounded store of passages found
by search. :class:`~retinue.memory.base.Memory` (what the sub-agent manager calls) is the
other half of a store's face; :class:`~retinue.memory.sqlite.SQLiteMemory` implements both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["DEFAULT_BLOCK_LIMITS", "Block", "MemoryStore", "Passage", "render_memory"]

DEFAULT_BLOCK_LIMITS: Mapping[str, int] = {
    "persona": 2000,
    "human": 2000,
    "working_context": 4000,
}


@dataclass(frozen=True, slots=True)
class Block:
    """One core-memory block: its name, current text, and size limit in characters.

    ``version`` counts the writes to the block (0: never written); a consolidation writes
    its rewrite only if the version is still the one it read, and merges otherwise.
    """

    name: str
    value: str
    limit: int
    version: int = 0


@dataclass(frozen=True, slots=True)
class Passage:
    """One archival passage. ``score`` is the search relevance (higher is better), else 0."""

    id: int
    content: str
    source: str
    created_at: float
    score: float = 0.0


@runtime_checkable
class MemoryStore(Protocol):
    """What the memory tools and the CLI need from a store, per ``(tenant, role)`` scope."""

    async def blocks(self, tenant: str, role: str) -> list[Block]:
        """Every block of the scope, in the configured order (empty ones included)."""
        ...

    async def set_block(self, tenant: str, role: str, name: str, value: str) -> Block:
        """Replace a block's text; raise ``BlockLimitError`` if it is too long."""
        ...

    async def append_block(self, tenant: str, role: str, name: str, content: str) -> Block:
        """Append a line to a block; raise ``BlockLimitError`` if it would be too long."""
        ...

    async def replace_in_block(
        self, tenant: str, role: str, name: str, old: str, new: str
    ) -> Block:
        """Replace text inside a block; raise ``MemoryStoreError`` if ``old`` is absent."""
        ...

    async def insert_passage(
        self, tenant: str, role: str, content: str, *, source: str = "agent"
    ) -> Passage | None:
        """Store one passage; ``None`` when it duplicates one already stored."""
        ...

    async def search(self, tenant: str, role: str, query: str, limit: int = 5) -> list[Passage]:
        """Archival passages relevant to ``query``, best first."""
        ...

    async def passage_count(self, tenant: str, role: str) -> int: ...


def render_memory(blocks: Sequence[Block], passage_count: int) -> str:
    """The memory section of a system prompt: every core block, then the archival count."""
    lines = [
        "## Your long-term memory",
        "Core memory (always shown here; change it with core_memory_append / core_memory_replace):",
    ]
    for b in blocks:
        lines.append(f'<{b.name} chars="{len(b.value)}/{b.limit}">')
        lines.append(b.value if b.value else "(empty)")
        lines.append(f"</{b.name}>")
    noun = "passage" if passage_count == 1 else "passages"
    lines.append(
        f"Archival memory: {passage_count} {noun} "
        "(use archival_memory_search to recall, archival_memory_insert to save)."
    )
    return "\n".join(lines)
