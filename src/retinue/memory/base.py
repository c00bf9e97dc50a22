"""What the runtime and the consolidation step need from long-term memory, as protocols.

The sub-agent manager only ever talks to :class:`Memory`: it asks for the text to put into a
role's system prompt when a run starts, and hands over a finished session's conversation for
consolidation. Stores (SQLite, PostgreSQL) and the consolidation step live behind it.

:mod:`retinue.memory.consolidate` works on any :class:`ConsolidationStore` (both stores are
one), so it imports neither concrete store and they can import it. :data:`MAX_PASSAGE_CHARS`
bounds one archival passage wherever one is written (the memory tools, an import), since
passages similar to a session are sent with every consolidation request of their role.
(``TaskStore``, ``KeepsTasks`` and ``task_store`` moved to :mod:`retinue.store.tasks`; the
names here are a deprecated alias for one release.)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from retinue.errors import MemoryStoreError
from retinue.messages import Message
from retinue.store.tasks import KeepsTasks, TaskStore, task_store  # deprecated alias here

if TYPE_CHECKING:
    from retinue.llm.base import Model
    from retinue.memory.store import Block, Passage

__all__ = [
    "MAX_PASSAGE_CHARS",
    "ConsolidationOptions",
    "ConsolidationStore",
    "KeepsTasks",
    "Memory",
    "NewPassage",
    "PendingQueue",
    "TaskStore",
    "check_passage",
    "task_store",
]

MAX_PASSAGE_CHARS = 4_000  # one archival passage (as the largest core block); a consolidation
# request carries up to `similar_passages` of them


def check_passage(content: str) -> None:
    """Raise :class:`MemoryStoreError` if ``content`` is empty or too long for one passage."""
    if not content:
        raise MemoryStoreError("a passage needs some text")
    if len(content) > MAX_PASSAGE_CHARS:
        raise MemoryStoreError(
            f"a passage of {len(content):,} characters is over the limit of "
            f"{MAX_PASSAGE_CHARS:,}; split it into shorter, self-contained passages"
        )


@dataclass(frozen=True, slots=True)
class NewPassage:
    """A passage to write: its text, where it came from, and its vector when embedded."""

    content: str
    source: str
    vector: Sequence[float] | None = None


@dataclass(frozen=True, slots=True)
class ConsolidationOptions:
    """``token_budget`` bounds the transcript sent; ``attempts`` counts model calls."""

    token_budget: int = 12_000
    attempts: int = 3
    retry_delay: float = 0.5
    similar_passages: int = 8


@runtime_checkable
class Memory(Protocol):
    """A store as the sub-agent manager uses it. For a role that declares shared blocks the
    manager also passes ``shared=`` (a sequence of :class:`~retinue.memory.store.SharedBlock`)
    to both methods, as Retinue's stores take it; for the others it does not, so a store
    without shared blocks serves every role that declares none."""

    async def render(self, tenant: str, role: str) -> str:
        """The memory section of the role's system prompt (core blocks, archival count)."""
        ...

    async def consolidate(
        self,
        *,
        tenant: str,
        role: str,
        session_id: str,
        messages: Sequence[Message],
        model: Model,
    ) -> bool:
        """Write what a finished session learned; must not raise for a model failure.

        True when it was written (or there was nothing to write); False when it could not be
        (the store keeps the transcript for a retry), so callers can say what happened.
        """
        ...


class PendingQueue(Protocol):
    """Where a store keeps a transcript from before its consolidation's model call until the
    commit. SQLite's steps are plain functions (files in ``pending/``), PostgreSQL's are
    coroutine functions (a table); the consolidation step calls either kind."""

    @property
    def write_inflight(self) -> Callable[..., Any]: ...

    @property
    def mark_failed(self) -> Callable[..., Any]: ...

    @property
    def remove(self) -> Callable[..., Any]: ...

    @property
    def ready(self) -> Callable[..., Any]: ...


class ConsolidationStore(Protocol):
    """What :mod:`retinue.memory.consolidate` needs from a store (SQLite or PostgreSQL).

    ``apply_consolidation`` writes one result in one transaction (a plain function for
    SQLite, run in a worker thread; a coroutine function for PostgreSQL)."""

    @property
    def options(self) -> ConsolidationOptions: ...

    @property
    def block_limits(self) -> Mapping[str, int]: ...

    @property
    def pending(self) -> PendingQueue: ...

    @property
    def apply_consolidation(self) -> Callable[..., Any]: ...

    async def blocks(self, tenant: str, role: str) -> list[Block]: ...

    async def shared_blocks(
        self, tenant: str, names: Sequence[str] | None = None
    ) -> list[Block]: ...

    async def search(self, tenant: str, role: str, query: str, limit: int = 5) -> list[Passage]: ...

    async def embed(self, texts: Sequence[str]) -> list[list[float]] | None: ...
