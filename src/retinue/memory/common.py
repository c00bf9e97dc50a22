"""What the SQLite and the PostgreSQL stores share, written once.

:class:`StoreCommon` holds the block rules (known names, size limits), the embedder call, and
the :class:`~retinue.memory.base.Memory` methods that hand over to
:mod:`retinue.memory.consolidate`. The functions are the rules that do not depend on the
database: the block edits of the memory tools, the blocks of a scope in their configured
order, reciprocal-rank fusion of two rankings, a block rewrite rebased on a concurrent change,
and the near-duplicate test.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, cast

from retinue.errors import BlockConflictError, BlockLimitError, MemoryStoreError
from retinue.memory.embeddings import Embedder
from retinue.memory.store import Block
from retinue.memory.text import merge_lines
from retinue.messages import Message

if TYPE_CHECKING:
    from retinue.llm.base import Model
    from retinue.memory.consolidate import ConsolidationResult, RetryReport, Store

__all__ = [
    "NEAR_DUPLICATE",
    "StoreCommon",
    "appending",
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

    def _limit(self, name: str) -> int:
        limit = self.block_limits.get(name)
        if limit is None:
            known = ", ".join(self.block_limits)
            raise MemoryStoreError(f"unknown core memory block {name!r}; blocks are: {known}")
        return limit

    def check_block(self, name: str, value: str) -> None:
        """Raise if ``name`` is unknown or ``value`` does not fit its limit."""
        limit = self._limit(name)
        if len(value) > limit:
            raise BlockLimitError(
                f"block {name!r} would hold {len(value)} characters, over its limit of "
                f"{limit}; shorten it (e.g. core_memory_replace to condense) and try again"
            )

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
        self, *, tenant: str, role: str, session_id: str, messages: Sequence[Message], model: Model
    ) -> bool:
        """Write what a finished session learned; never raises for a model failure.

        False when nothing could be written (the transcript is kept for ``retry_pending``).
        """
        result = await self.consolidate_session(
            tenant=tenant, role=role, session_id=session_id, messages=messages, model=model
        )
        return result.ok

    async def consolidate_session(
        self, *, tenant: str, role: str, session_id: str, messages: Sequence[Message], model: Model
    ) -> ConsolidationResult:
        """:meth:`consolidate`, returning what was written (or why nothing was)."""
        from retinue.memory.consolidate import consolidate_session

        return await consolidate_session(
            cast("Store", self), tenant=tenant, role=role, session_id=session_id,
            messages=messages, model=model,
        )  # fmt: skip

    async def retry_pending(
        self, model_for: Callable[[str], Model], *, stale_after: float = 3600.0
    ) -> RetryReport:
        """Re-run kept transcripts; ``model_for(recorded_model_name)`` gives the model (with
        PostgreSQL, other workers skip the transcripts this one claimed)."""
        from retinue.memory.consolidate import retry_pending

        return await retry_pending(cast("Store", self), model_for, stale_after=stale_after)


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
