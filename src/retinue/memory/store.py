"""The records of long-term memory and the :class:`MemoryStore` protocol the tools use.

A scope is one ``(tenant, role)`` pair; every method takes both, and nothing ever crosses
scopes. *Core memory* is a few named text blocks with size limits (characters), shown in the
role's system prompt on every run; *archival memory* is an unbounded store of passages found
by search. :class:`~retinue.memory.base.Memory` (what the sub-agent manager calls) is the
other half of a store's face; :class:`~retinue.memory.sqlite.SQLiteMemory` implements both.

*Shared blocks* are core blocks of a tenant that several roles declare (``memory: {shared:
[team-notes]}``, each :class:`SharedBlock` writable or read-only): stored in the same table
under the scope :data:`SHARED_SCOPE` (a name no role can have), with the same
read-and-write-in-one-transaction updates, each up to :data:`SHARED_BLOCK_LIMIT` characters
(:class:`SharedMemoryStore`). Tenants never see each other's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = [
    "DEFAULT_BLOCK_LIMITS",
    "MAX_SHARED_BLOCKS",
    "SHARED_BLOCK_LIMIT",
    "SHARED_SCOPE",
    "Block",
    "MemoryStore",
    "Passage",
    "SharedBlock",
    "SharedMemoryStore",
    "render_memory",
    "shared_block_name",
]

DEFAULT_BLOCK_LIMITS: Mapping[str, int] = {
    "persona": 2000,
    "human": 2000,
    "working_context": 4000,
}

SHARED_SCOPE = "@shared"  # the role column of shared blocks: role names cannot begin with @
SHARED_BLOCK_LIMIT = 4000  # characters of one shared block (as working_context)
MAX_SHARED_BLOCKS = 16  # shared blocks one role may declare (each is in its prompt)
_SHARED_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def shared_block_name(name: object) -> str | None:
    """``name`` when it can name a shared block (letters, digits, ``_ . -``, at most 64,
    not one of the default core block names, which a role's own blocks use), else None."""
    if not isinstance(name, str) or not _SHARED_NAME.fullmatch(name):
        return None
    return None if name in DEFAULT_BLOCK_LIMITS else name


@dataclass(frozen=True, slots=True)
class SharedBlock:
    """A shared block a role declares: its name, and whether the role may change it (its
    memory tools and its consolidation); read-only, the role only sees it in its prompt."""

    name: str
    writable: bool = True


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


@runtime_checkable
class SharedMemoryStore(Protocol):
    """What the memory tools and the CLI need for shared blocks, per tenant."""

    async def shared_blocks(self, tenant: str, names: Sequence[str] | None = None) -> list[Block]:
        """The named shared blocks in that order (empty ones included), or every stored one
        of the tenant by name when ``names`` is None."""
        ...

    async def edit_shared_block(
        self, tenant: str, name: str, change: Callable[[str], str]
    ) -> Block:
        """Read, change and write one shared block in one transaction; raise
        ``BlockLimitError`` if the result is too long."""
        ...


def render_memory(
    blocks: Sequence[Block],
    passage_count: int,
    shared: Sequence[tuple[Block, bool]] = (),
) -> str:
    """The memory section of a system prompt: every core block, the shared blocks (each
    with whether the role may write it), then the archival count."""
    lines = [
        "## Your long-term memory",
        "Core memory (always shown here; change it with core_memory_append / core_memory_replace):",
    ]
    for b in blocks:
        lines.append(f'<{b.name} chars="{len(b.value)}/{b.limit}">')
        lines.append(b.value if b.value else "(empty)")
        lines.append(f"</{b.name}>")
    if shared:
        lines.append(
            "Shared memory (blocks other roles see too; the writable ones change with "
            "core_memory_append / core_memory_replace, by their names):"
        )
    for b, writable in shared:
        access = "writable" if writable else "read-only"
        lines.append(f'<{b.name} shared="{access}" chars="{len(b.value)}/{b.limit}">')
        lines.append(b.value if b.value else "(empty)")
        lines.append(f"</{b.name}>")
    noun = "passage" if passage_count == 1 else "passages"
    lines.append(
        f"Archival memory: {passage_count} {noun} "
        "(use archival_memory_search to recall, archival_memory_insert to save)."
    )
    return "\n".join(lines)
