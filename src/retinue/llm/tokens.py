"""Token estimates that need no tokenizer download: about four UTF-8 bytes per token.

Used only where the provider has not reported a figure yet (what was appended since the last
call); the provider's own counts are preferred everywhere else.
"""

from __future__ import annotations

from collections.abc import Sequence

from retinue.messages import Message, message_text_size

__all__ = ["estimate_text_tokens", "estimate_tokens"]

_PER_MESSAGE_OVERHEAD = 4


def estimate_text_tokens(text: str) -> int:
    return (len(text.encode()) + 3) // 4


def estimate_tokens(messages: Sequence[Message]) -> int:
    """Rough token count of a conversation (text / 4 plus a small per-message overhead)."""
    return (message_text_size(messages) + 3) // 4 + _PER_MESSAGE_OVERHEAD * len(messages)
