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

The in-process service reads them through the caller's tenant space; another service
(``retinue serve --temporal``'s front end) gives :func:`transcript_routes` a
:class:`TranscriptReader` of its own, whose ``inside`` and ``shown`` name the ids its way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import FastAPI, Query, Request
from starlette.exceptions import HTTPException

from retinue.server.tenants import space_of
from retinue.store.transcripts import Transcript, TranscriptStore, children_of, valid_transcript_id

__all__ = ["TranscriptReader", "space_reader", "transcript_routes"]

Limit = Annotated[int, Query(ge=1, le=1000)]


@dataclass(frozen=True, slots=True)
class TranscriptReader:
    """What one request reads of the kept transcripts: its tenant's, in ``store`` (None:
    none are kept here); a session id it sends is read by ``inside`` (None: it names
    nothing there), and the ids of an answer are ``shown`` as its clients name them."""

    tenant: str
    store: TranscriptStore | None
    inside: Callable[[str], str | None]
    shown: Callable[[Any], Any]


def space_reader(request: Request) -> TranscriptReader:
    """The in-process service's reader: the caller's tenant space."""
    space = space_of(request)
    memory = space.runtime.memory
    store = memory.transcripts if memory is not None else None
    return TranscriptReader(space.tenant, store, space.inside, space.shown)


async def _whole(reader: TranscriptReader, store: TranscriptStore, found: Transcript) -> Any:
    children = await children_of(store, reader.tenant, found.summary)
    return reader.shown({
        **found.summary.to_dict(), "entries": found.entries,
        "children": [c.to_dict() for c in children],
    })  # fmt: skip


def transcript_routes(
    app: FastAPI, reader_of: Callable[[Request], TranscriptReader] = space_reader
) -> None:
    """Add the routes (before ``/v1/sessions/{id:path}``, which would take them), each
    reading through ``reader_of`` the request."""

    @app.get("/v1/transcripts")
    async def list_transcripts(
        request: Request, parent: str | None = None, limit: Limit = 100
    ) -> dict[str, Any]:
        reader = reader_of(request)
        store = reader.store
        inner = reader.inside(parent) if parent is not None else None
        if store is None or (parent is not None and inner is None):
            return {"transcripts": []}
        found = await store.ended(reader.tenant, parent_id=inner, limit=limit)
        return {"transcripts": reader.shown([s.to_dict() for s in found])}

    @app.get("/v1/transcripts/search")
    async def search_transcripts(
        request: Request,
        q: Annotated[str, Query(min_length=1, max_length=1000)],
        limit: Limit = 20,
    ) -> dict[str, Any]:
        reader = reader_of(request)
        store = reader.store
        hits = await store.search(reader.tenant, q, limit=limit) if store is not None else []
        shown = [{**h.summary.to_dict(), "snippet": h.snippet} for h in hits]
        return {"query": q, "hits": reader.shown(shown)}

    @app.get("/v1/transcripts/{tid}")
    async def get_transcript(tid: str, request: Request) -> dict[str, Any]:
        reader = reader_of(request)
        store = reader.store
        found = await store.get(reader.tenant, tid) if store and valid_transcript_id(tid) else None
        if store is None or found is None:
            raise HTTPException(404, f"no transcript {tid!r}")
        return await _whole(reader, store, found)

    @app.get("/v1/sessions/{sid:path}/transcript")
    async def session_transcript(sid: str, request: Request) -> dict[str, Any]:
        reader = reader_of(request)
        store = reader.store
        if store is not None and valid_transcript_id(sid):
            found = await store.get(reader.tenant, sid)
            if found is not None:
                return await _whole(reader, store, found)
        inner = reader.inside(sid)
        latest = []
        if store is not None and inner is not None:
            latest = await store.ended(reader.tenant, session_id=inner, limit=1)
        found = await store.get(reader.tenant, latest[0].id) if store and latest else None
        if store is None or found is None:
            raise HTTPException(404, f"no transcript of session {sid!r} (it has not ended)")
        return await _whole(reader, store, found)
