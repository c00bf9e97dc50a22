"""What a session leaves when it ends: its transcript, kept in a :class:`TranscriptStore`.

:class:`TranscriptKeeper` is the :class:`~retinue.engine.session.Lifecycle` ``transcript``
hook's work: at the end of a session's close it summarises the session (who it was, from its
tool context; what it used; how it ended, from its history) and keeps its entries (see
:mod:`retinue.store.transcripts`). Keeping never fails a close: a store that is down is
logged and the close goes on. Transcripts older than the retention are pruned now and then
(at most once an hour per keeper).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from retinue.engine.session import FAILED_NOTE, INTERRUPTED_NOTE, Session
from retinue.messages import AssistantMessage, Message, UserMessage
from retinue.store.transcripts import (
    TranscriptStore,
    TranscriptSummary,
    entries_of,
    tool_call_count,
    transcript_id,
)

__all__ = ["PRUNE_EVERY", "TranscriptKeeper", "outcome_of"]

log = logging.getLogger("retinue.transcripts")

PRUNE_EVERY = 3600.0
"""Seconds between two prunes of old transcripts by one keeper."""

_FAILED = FAILED_NOTE.partition("{")[0]


def outcome_of(messages: Sequence[Message], asking: bool) -> str:
    """How a session ended, read from its history: ``asking``, ``empty`` (no turn),
    ``interrupted``, ``failed`` or ``done``."""
    if asking:
        return "asking"
    if not any(isinstance(m, UserMessage) for m in messages):
        return "empty"
    last = messages[-1]
    if isinstance(last, AssistantMessage) and not last.tool_calls:
        if last.content == INTERRUPTED_NOTE:
            return "interrupted"
        if last.content.startswith(_FAILED):
            return "failed"
    return "done"


class TranscriptKeeper:
    """Keeps every ended session's transcript in ``store`` for ``retention_days``."""

    def __init__(self, store: TranscriptStore, retention_days: float) -> None:
        self.store = store
        self.retention_days = retention_days
        self._pruned = 0.0

    async def keep(self, session: Session) -> None:
        """Keep ``session``'s transcript (it has just ended); never raises an ``Exception``."""
        try:
            await self._keep(session)
        except Exception:
            log.warning("could not keep the transcript of %s", session.id, exc_info=True)

    async def _keep(self, session: Session) -> None:
        ctx, messages = session.config.context, session.messages
        if ctx.depth == 0:
            kind = "main"
        else:
            kind = "interactive" if session.config.interactive else "one-shot"
        inp, out, cached, requests = session.usage_figures
        now = time.time()
        summary = TranscriptSummary(
            transcript_id(), session.id, ctx.parent_id, ctx.role, kind, ctx.depth,
            session.turns, tool_call_count(messages), inp, out, cached, requests,
            session.cost_usd, outcome_of(messages, session.question is not None),
            session.started_at, now, len(messages),
        )  # fmt: skip
        await self.store.keep(ctx.tenant, summary, entries_of(messages))
        if now - self._pruned >= PRUNE_EVERY:
            self._pruned = now
            await self.store.prune(now - self.retention_days * 86400.0)
