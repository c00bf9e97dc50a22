"""``ReadTranscript``: a parent reads what its finished sub-agents said and did.

Given to the main agent (where transcripts are kept) and to the roles with the
``transcripts`` capability or that name the tool. Without ``session`` it lists the calling
agent's finished sub-agent sessions (the latest first); with a session id (its latest kept
transcript) or a transcript id, it returns that transcript as text
(:func:`~retinue.store.transcripts.transcript_text`). Only the caller's own descendants,
in its own tenant: any other id reads as unknown.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from retinue.errors import ToolError
from retinue.store.transcripts import (
    Transcript,
    TranscriptStore,
    transcript_store,
    transcript_text,
    valid_transcript_id,
)
from retinue.tools.base import ToolContext, tool

__all__ = ["TRANSCRIPT_TOOL_NAME", "read_transcript"]

TRANSCRIPT_TOOL_NAME = "ReadTranscript"


def _store(ctx: ToolContext) -> TranscriptStore:
    store = transcript_store(ctx.memory)
    if store is None:
        raise ToolError("no transcripts are kept here")
    return store


def _mine(ctx: ToolContext, session_id: str) -> bool:
    return session_id.startswith(ctx.agent_id + "/")


async def _find(ctx: ToolContext, store: TranscriptStore, session: str) -> Transcript | None:
    if valid_transcript_id(session):
        found = await store.get(ctx.tenant, session)
    else:
        latest = await store.ended(ctx.tenant, session_id=session, limit=1)
        found = await store.get(ctx.tenant, latest[0].id) if latest else None
    return found if found is not None and _mine(ctx, found.summary.session_id) else None


@tool(TRANSCRIPT_TOOL_NAME)
async def read_transcript(
    ctx: ToolContext,
    session: Annotated[
        str,
        Field(
            max_length=300,
            description="a finished sub-agent's session id (main/researcher#1) or transcript "
            "id (t-...); empty: list your finished sub-agent sessions",
        ),
    ] = "",
    max_chars: Annotated[
        int, Field(ge=1000, le=100_000, description="most characters to return (the last ones)")
    ] = 20_000,
) -> str:
    """Read the transcript of one of your finished sub-agent sessions: what it was asked,
    what it said, the tools it called and their results."""
    store = _store(ctx)
    if not session.strip():
        found = await store.ended(ctx.tenant, parent_id=ctx.agent_id, limit=20)
        if not found:
            return "None of your sub-agent sessions has finished yet."
        return "\n".join(
            f"{s.session_id} ({s.role}, {s.outcome}, {s.turns} turns): transcript {s.id}"
            for s in found
        )
    found = await _find(ctx, store, session.strip())
    if found is None:
        raise ToolError(
            f"no finished sub-agent session {session!r} of yours (call {TRANSCRIPT_TOOL_NAME} "
            "with no session to list them)"
        )
    return transcript_text(found, max_chars)
