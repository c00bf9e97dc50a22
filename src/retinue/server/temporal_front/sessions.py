"""The sessions routes of the front end: each conversation's session tree, as its own
workflow reports it (see the package's docstring)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from starlette.exceptions import HTTPException

from retinue.server.temporal_front.front import TemporalFront, conversation_of, tenant_of


def _no_session(sid: str) -> HTTPException:
    return HTTPException(404, f"no live session {sid[:200]!r}")


def add_session_routes(app: FastAPI, front: TemporalFront) -> None:
    @app.get("/v1/sessions")
    async def list_sessions(
        request: Request, parent: str | None = None, team: str | None = None
    ) -> dict[str, Any]:
        """The open sessions of the tenant's conversations, or of the one whose agent
        ``parent`` (or ``team``) names; each conversation's tree is its workflow's query."""
        tenant, named = tenant_of(request, front), parent or team
        if named is None:
            sessions = await front.sessions(tenant)
        else:
            cid = conversation_of(named)
            sessions = await front.sessions(tenant, cid) if cid is not None else []
        if parent is not None:
            sessions = [s for s in sessions if s["parent_id"] == parent]
        return {"sessions": sessions, "tasks": {}}

    @app.get("/v1/sessions/{sid:path}")
    async def get_session(sid: str, request: Request) -> dict[str, Any]:
        shown = await front.session(tenant_of(request, front), sid)
        if shown is None:
            raise _no_session(sid)
        return shown

    @app.post("/v1/sessions/{sid:path}/interrupt")
    async def interrupt(sid: str, request: Request) -> dict[str, Any]:
        """Cancel the running turn of ``conv-CID`` (the conversation's) or of one of its
        sub-agent sessions alone."""
        done = await front.interrupt_session(tenant_of(request, front), sid)
        if done is None:
            raise _no_session(sid)
        return {"id": sid, "interrupted": done}

    async def not_here(sid: str, request: Request, what: str) -> HTTPException:
        if await front.node(tenant_of(request, front), sid) is None:
            return _no_session(sid)
        return HTTPException(409, f"session {sid[:200]!r}: {what} on Temporal")

    @app.post("/v1/sessions/{sid:path}/answer")
    async def answer(sid: str, request: Request) -> dict[str, Any]:
        """A session's question goes to its parent agent, whose next message answers it."""
        raise await not_here(sid, request, "its question is its parent agent's to answer")

    @app.post("/v1/sessions/{sid:path}/steer")
    async def steer(sid: str, request: Request) -> dict[str, Any]:
        raise await not_here(sid, request, "steering a session's turn is not served")
