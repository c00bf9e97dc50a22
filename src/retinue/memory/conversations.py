"""Deprecated alias of :mod:`retinue.store.conversations` (moved there, issue 42).

Import from the new module: this alias goes in the next release.
"""

from retinue.store.conversations import (
    TITLE_CHARS,
    ConversationStore,
    ConversationSummary,
    approvals_json,
    parse_approvals,
    same_prefix,
    title_of,
)

__all__ = [
    "TITLE_CHARS",
    "ConversationStore",
    "ConversationSummary",
    "approvals_json",
    "parse_approvals",
    "same_prefix",
    "title_of",
]
