"""What the runtime needs from long-term memory, as a protocol.

The sub-agent manager only ever talks to :class:`Memory`: it asks for the text to put into a
role's system prompt when a run starts, and hands over a finished session's conversation for
consolidation. Stores (SQLite, PostgreSQL) and the consolidation step live behind it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from retinue.messages import Message

if TYPE_CHECKING:
    from retinue.llm.base import Model

__all__ = ["Memory"]


@runtime_checkable
class Memory(Protocol):
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
