"""The HTTP routes of kept transcripts (ended sessions; see :mod:`retinue.store.transcripts`).

::

    GET /v1/transcripts[?parent=SESSION_ID][&limit=N]   the tenant's ended sessions, the
                                                        latest first (summaries)
    GET /v1/transcripts/search?q=TEXT[&limit=N]         those holding every word, best first,
                                                        each with a snippet («found»)
    GET /v1/transcripts/{id}                            one: summary, entries, "children" (the
                                                        sessions it started)
    GET /v1/sessions/{session_id}/transcript            the latest kept transcript of that
                                                        session id (a transcript id works too)

Each tenant sees only its own: the store is asked for the caller's tenant only, a session id
a client sends is read in its space (:meth:`~retinue.server.tenants.TenantSpace.inside`), and
the answer shows its ids as its clients see them. Another tenant's transcript is 404, as if
there were none. Without a memory store the lists are empty (with
``transcript_retention_days = 0`` no new transcript is kept; those kept before stay listed).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import FastAPI, Query
from starlette.exceptions import HTTPException

from retinue.server.tenants import Space, TenantSpace
from retinue.store.transcripts import Transcript, TranscriptStore, children_of, valid_transcript_id

__all__ = ["transcript_routes"]

Limit = Annotated[int, Query(ge=1, le=1000)]


def _store(space: TenantSpace) -> TranscriptStore | None:
    memory = space.runtime.memory
    return memory.transcripts if memory is not None else None


async def _whole(space: TenantSpace, store: TranscriptStore, found: Transcript) -> dict[str, Any]:
    children = await children_of(store, space.tenant, found.summary)
    return space.shown({
        **found.summary.to_dict(), "entries": found.entries,
        "children": [c.to_dict() for c in children],
    })  # fmt: skip


def transcript_routes(app: FastAPI) -> None:
    """Add the routes (before ``/v1/sessions/{id:path}``, which would take them)."""

    @app.get("/v1/transcripts")
    async def list_transcripts(
        space: Space, parent: str | None = None, limit: Limit = 100
    ) -> dict[str, Any]:
        store = _store(space)
        inner = space.inside(parent) if parent is not None else None
        if store is None or (parent is not None and inner is None):
            return {"transcripts": []}
        found = await store.ended(space.tenant, parent_id=inner, limit=limit)
        return {"transcripts": space.shown([s.to_dict() for s in found])}

    @app.get("/v1/transcripts/search")
    async def search_transcripts(
        space: Space, q: Annotated[str, Query(min_length=1, max_length=1000)], limit: Limit = 20
    ) -> dict[str, Any]:
        store = _store(space)
        hits = await store.search(space.tenant, q, limit=limit) if store is not None else []
        shown = [{**h.summary.to_dict(), "snippet": h.snippet} for h in hits]
        return {"query": q, "hits": space.shown(shown)}

    @app.get("/v1/transcripts/{tid}")
    async def get_transcript(tid: str, space: Space) -> dict[str, Any]:
        store = _store(space)
        found = await store.get(space.tenant, tid) if store and valid_transcript_id(tid) else None
        if store is None or found is None:
            raise HTTPException(404, f"no transcript {tid!r}")
        return await _whole(space, store, found)

    @app.get("/v1/sessions/{sid:path}/transcript")
    async def session_transcript(sid: str, space: Space) -> dict[str, Any]:
        store = _store(space)
        if store is not None and valid_transcript_id(sid):
            found = await store.get(space.tenant, sid)
            if found is not None:
                return await _whole(space, store, found)
        inner = space.inside(sid)
        latest = []
        if store is not None and inner is not None:
            latest = await store.ended(space.tenant, session_id=inner, limit=1)
        found = await store.get(space.tenant, latest[0].id) if store and latest else None
        if store is None or found is None:
            raise HTTPException(404, f"no transcript of session {sid!r} (it has not ended)")
        return await _whole(space, store, found)
