"""What the SQLite and the PostgreSQL stores share, written once.

:class:`StoreCommon` holds the block rules (known names, size limits), the embedder call, the
shared blocks (:class:`~retinue.memory.store.SharedMemoryStore`, on each store's two block
primitives), and the :class:`~retinue.memory.base.Memory` methods (``render``, and those that
hand over to :mod:`retinue.memory.consolidate`). The functions are the rules that do not
depend on the database: the block edits of the memory tools, the blocks of a scope in their
configured order, reciprocal-rank fusion of two rankings, a block rewrite rebased on a
concurrent change, and the near-duplicate test.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, cast

from retinue.errors import BlockConflictError, BlockLimitError, MemoryStoreError
from retinue.memory.embeddings import Embedder
from retinue.memory.store import (
    SHARED_BLOCK_LIMIT,
    SHARED_SCOPE,
    Block,
    SharedBlock,
    render_memory,
    shared_block_name,
)
from retinue.memory.text import merge_lines
from retinue.messages import Message

if TYPE_CHECKING:
    from retinue.llm.base import Model
    from retinue.memory.consolidate import ConsolidationResult, RetryReport, Store

__all__ = [
    "NEAR_DUPLICATE",
    "StoreCommon",
    "appending",
    "check_size",
    "fuse",
    "is_near_duplicate",
    "ordered_blocks",
    "rebase",
    "replacing",
]

log = logging.getLogger("retinue.memory")

NEAR_DUPLICATE = 0.85  # Jaccard similarity of word sets from which a passage is a duplicate
_RRF_K = 60


class StoreCommon:
    """The store methods that do not touch the database (mixed into both stores)."""

    embedder: Embedder | None
    block_limits: dict[str, int]
    shared_limit: int = SHARED_BLOCK_LIMIT

    # -- what each store implements (its SQL) ------------------------------------------

    async def blocks(self, tenant: str, role: str) -> list[Block]:
        raise NotImplementedError

    async def passage_count(self, tenant: str, role: str) -> int:
        raise NotImplementedError

    async def _stored(self, tenant: str, scope: str) -> dict[str, tuple[str, int]]:
        """The blocks stored in one scope: name -> (value, version)."""
        raise NotImplementedError

    async def _edit(
        self, tenant: str, scope: str, name: str, change: Callable[[str], str], limit: int
    ) -> Block:
        """Read, change and write one block in one transaction (no lost update)."""
        raise NotImplementedError

    # -- shared blocks ----------------------------------------------------------------

    async def shared_blocks(self, tenant: str, names: Sequence[str] | None = None) -> list[Block]:
        """The named shared blocks in that order (empty ones included), or every stored one
        of the tenant by name when ``names`` is None."""
        stored = await self._stored(tenant, SHARED_SCOPE)
        chosen = sorted(stored) if names is None else list(names)
        return [Block(n, *_value_limit_version(stored, n, self.shared_limit)) for n in chosen]

    async def edit_shared_block(
        self, tenant: str, name: str, change: Callable[[str], str]
    ) -> Block:
        """Read, change and write one shared block in one transaction."""
        if shared_block_name(name) is None:
            raise MemoryStoreError(
                f"{name!r} cannot name a shared block (letters, digits, '_', '.', '-'; "
                "not a core block name)"
            )
        return await self._edit(tenant, SHARED_SCOPE, name, change, self.shared_limit)

    def check_stored_block(self, scope: str, name: str, value: str) -> None:
        """:meth:`check_block` for a block of ``scope`` (a role's, or the shared scope)."""
        if scope != SHARED_SCOPE:
            self.check_block(name, value)
        elif shared_block_name(name) is None:
            raise MemoryStoreError(f"{name!r} cannot name a shared block")
        else:
            check_size(name, value, self.shared_limit)

    async def render(self, tenant: str, role: str, shared: Sequence[SharedBlock] = ()) -> str:
        """The memory section of the role's system prompt, with the ``shared`` blocks it
        declares (each marked writable or read-only)."""
        blocks = await self.blocks(tenant, role)
        count = await self.passage_count(tenant, role)
        found = await self.shared_blocks(tenant, [s.name for s in shared]) if shared else []
        pairs = [(b, s.writable) for b, s in zip(found, shared, strict=True)]
        return render_memory(blocks, count, pairs)

    # -- block rules ------------------------------------------------------------------

    def _limit(self, name: str) -> int:
        limit = self.block_limits.get(name)
        if limit is None:
            known = ", ".join(self.block_limits)
            raise MemoryStoreError(f"unknown core memory block {name!r}; blocks are: {known}")
        return limit

    def check_block(self, name: str, value: str) -> None:
        """Raise if ``name`` is unknown or ``value`` does not fit its limit."""
        check_size(name, value, self._limit(name))

    async def embed(self, texts: Sequence[str]) -> list[list[float]] | None:
        """Vectors for ``texts``, or ``None`` without an embedder or when it fails."""
        if self.embedder is None or not texts:
            return None
        try:
            return await self.embedder.embed(texts)
        except Exception as exc:
            log.warning("embedding failed, falling back to full-text search: %s", exc)
            return None

    async def consolidate(
        self,
        *,
        tenant: str,
        role: str,
        session_id: str,
        messages: Sequence[Message],
        model: Model,
        shared: Sequence[SharedBlock] = (),
    ) -> bool:
        """Write what a finished session learned (into the writable ``shared`` blocks too);
        never raises for a model failure.

        False when nothing could be written (the transcript is kept for ``retry_pending``).
        """
        result = await self.consolidate_session(
            tenant=tenant, role=role, session_id=session_id, messages=messages, model=model,
            shared=shared,
        )  # fmt: skip
        return result.ok

    async def consolidate_session(
        self,
        *,
        tenant: str,
        role: str,
        session_id: str,
        messages: Sequence[Message],
        model: Model,
        shared: Sequence[SharedBlock] = (),
    ) -> ConsolidationResult:
        """:meth:`consolidate`, returning what was written (or why nothing was)."""
        from retinue.memory.consolidate import consolidate_session

        return await consolidate_session(
            cast("Store", self), tenant=tenant, role=role, session_id=session_id,
            messages=messages, model=model, shared=shared,
        )  # fmt: skip

    async def retry_pending(
        self,
        model_for: Callable[[str], Model],
        *,
        stale_after: float = 3600.0,
        shared_for: Callable[[str], Sequence[SharedBlock]] | None = None,
    ) -> RetryReport:
        """Re-run kept transcripts; ``model_for(recorded_model_name)`` gives the model (with
        PostgreSQL, other workers skip the transcripts this one claimed), ``shared_for(role)``
        the shared blocks the role declares (none without it)."""
        from retinue.memory.consolidate import retry_pending

        return await retry_pending(
            cast("Store", self), model_for, stale_after=stale_after, shared_for=shared_for
        )


def check_size(name: str, value: str, limit: int) -> None:
    """Raise :class:`BlockLimitError` when ``value`` is over the block's ``limit``."""
    if len(value) > limit:
        raise BlockLimitError(
            f"block {name!r} would hold {len(value)} characters, over its limit of "
            f"{limit}; shorten it (e.g. core_memory_replace to condense) and try again"
        )


def _value_limit_version(
    stored: Mapping[str, tuple[str, int]], name: str, limit: int
) -> tuple[str, int, int]:
    value, version = stored.get(name, ("", 0))
    return value, limit, version


def appending(content: str) -> Callable[[str], str]:
    """A block edit adding ``content`` as a new line."""
    return lambda old: f"{old}\n{content}" if old else content


def replacing(name: str, old: str, new: str) -> Callable[[str], str]:
    """A block edit replacing ``old`` by ``new``; it raises when ``old`` is not there."""

    def edit(current: str) -> str:
        if not old or old not in current:
            raise MemoryStoreError(
                f"text {old!r} not found in block {name!r}; copy it exactly from the block"
            )
        return current.replace(old, new)

    return edit


def ordered_blocks(limits: Mapping[str, int], stored: Mapping[str, tuple[str, int]]) -> list[Block]:
    """Every configured block in order, from ``stored`` (name -> (value, version)) or empty."""
    out = []
    for name, limit in limits.items():
        value, version = stored.get(name, ("", 0))
        out.append(Block(name, value, limit, version))
    return out


def fuse(rankings: Iterable[Sequence[int]], limit: int) -> list[tuple[int, float]]:
    """Reciprocal-rank fusion of rankings of passage ids: the best ``limit`` (id, score)."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, pid in enumerate(ranking):
            scores[pid] = scores.get(pid, 0.0) + 1.0 / (_RRF_K + rank + 1)
    best = sorted(scores, key=lambda pid: scores[pid], reverse=True)[:limit]
    return [(pid, scores[pid]) for pid in best]


def rebase(
    name: str, value: str, base: Block | None, current: str, version: int, limit: int
) -> str:
    """``value`` (a rewrite of ``base``) if the block is unchanged since (same ``version``),
    else merged line by line into ``current``; ``BlockConflictError`` if that is too long."""
    if base is None or version == base.version:
        return value
    merged = merge_lines(base.value, value, current)
    if len(merged) > limit:
        raise BlockConflictError(
            f"block {name!r} changed during consolidation and the merge is too long"
        )
    return merged


def is_near_duplicate(words: set[str], others: Iterable[set[str]]) -> bool:
    """Whether any of ``others`` shares (almost) all words with ``words`` (Jaccard)."""
    for other in others:
        union = words | other
        if union and len(words & other) / len(union) >= NEAR_DUPLICATE:
            return True
    return False
