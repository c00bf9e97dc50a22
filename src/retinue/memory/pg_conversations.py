"""Deprecated alias of :mod:`retinue.store.pg_conversations` (moved there, issue 42).

Import from the new module: this alias goes in the next release.
"""

from retinue.store.leases import ConversationLeases, LeaseHolder
from retinue.store.pg_conversations import PgConversations

__all__ = ["ConversationLeases", "LeaseHolder", "PgConversations"]
