"""Leases: which worker runs a conversation's turn, when several share one database.

A worker runs a conversation's turn only while it holds the conversation's lease: its
``owner`` (the worker), a ``token`` (the turn) and an expiry that the worker renews during a
long turn. Taking a lease succeeds when there is none, when it expired (its worker died), or
when it is a *sticky* hold of the same worker (a ``keep_sessions`` conversation whose
sessions live in that worker's memory). The PostgreSQL store keeps them
(:class:`~retinue.store.pg_conversations.PgConversations`); one process on SQLite needs none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["ConversationLeases", "LeaseHolder"]


@dataclass(frozen=True, slots=True)
class LeaseHolder:
    """Who holds a conversation: the worker, whether it keeps its sessions (``sticky``), and
    for how many more seconds."""

    owner: str
    sticky: bool
    expires_in: float


@runtime_checkable
class ConversationLeases(Protocol):
    """Per-conversation leases in a store shared by several workers."""

    async def acquire(
        self, tenant: str, cid: str, owner: str, token: str, ttl: float
    ) -> LeaseHolder | None:
        """Take the lease for one turn (``token``); None when taken, else who holds it."""
        ...

    async def renew(self, tenant: str, cid: str, owner: str, token: str, ttl: float) -> bool:
        """Push the expiry of a held lease ``ttl`` seconds on; False if it was lost."""
        ...

    async def release(
        self, tenant: str, cid: str, owner: str, token: str | None, *, hold_for: float = 0.0
    ) -> None:
        """End the turn's lease (``token``; None: the worker's sticky hold); with
        ``hold_for``, keep the conversation on this worker that long (sticky)."""
        ...
