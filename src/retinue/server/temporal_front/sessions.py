"""The sessions routes of the front end: each conversation's session tree, as its own
workflow reports it (see the package's docstring)."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import FastAPI, Request
from starlette.exceptions import HTTPException
from temporalio.client import WorkflowHandle, WorkflowUpdateFailedError
from temporalio.service import RPCError, RPCStatusCode

from retinue.errors import RetinueError
from retinue.server.app import AnswerIn
from retinue.server.conversations import agent_id_for
from retinue.server.temporal_front.front import (
    ConversationClosed,
    TemporalFront,
    TemporalUnavailable,
    conversation_of,
    tenant_of,
)
from retinue.temporal.workflow import ConversationWorkflow


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
    async def steer(sid: str, request: Request, body: AnswerIn | None = None) -> dict[str, Any]:
        """Give the running turn of ``conv-CID`` (the conversation's) or of one of its
        sub-agent sessions ``content`` before its next model call (its workflow's ``steer``
        Update); 409 when no turn of it runs. (A body that is missing is told after the
        session is found: an id that names nothing is 404 either way.)"""
        tenant = tenant_of(request, front)
        handle = await _session_workflow(front, tenant, sid)
        if handle is None:
            raise _no_session(sid)
        if body is None:
            raise HTTPException(422, 'the body must be {"content": "..."}')
        front.conversations(tenant).check_message(body.content)  # (too large: 413)
        done = await _steered(handle, body.content, front.wait_for_worker_s)
        if done is None:
            raise _no_session(sid)
        if not done:
            raise HTTPException(409, f"session {sid[:200]!r} has no running turn to steer")
        return {"id": sid, "steered": True}


async def _session_workflow(
    front: TemporalFront, tenant: str, sid: str
) -> WorkflowHandle[ConversationWorkflow, Any] | None:
    """The workflow of the tenant's session ``sid``: ``conv-CID``'s is the conversation's,
    a sub-agent session's is the node its conversation's workflow reports (a request never
    names a workflow id); None when there is none."""
    cid = conversation_of(sid)
    if cid is not None and sid == agent_id_for(cid):
        running = await front.state(tenant, cid) is not None
        return front.conversations(tenant).handle(cid) if running else None
    found = await front.node(tenant, sid)
    if found is None:
        return None
    return front.client.get_workflow_handle_for(ConversationWorkflow.run, found[1].workflow_id)


async def _steered(
    handle: WorkflowHandle[ConversationWorkflow, Any], text: str, wait_s: float
) -> bool | None:
    """The ``steer`` Update's answer; None when the workflow is not running;
    :class:`TemporalUnavailable` (503) when no worker answers within ``wait_s``."""
    try:
        async with asyncio.timeout(wait_s):
            return await handle.execute_update(ConversationWorkflow.steer, text)
    except TimeoutError:
        raise TemporalUnavailable(
            f"no worker answered within {wait_s:g} s (is a `retinue worker --temporal`"
            " serving this tenant's task queue?)"
        ) from None
    except WorkflowUpdateFailedError as exc:  # its validator refused it
        why = str(getattr(exc.cause, "message", None) or exc.cause)
        if "closed" in why:
            raise ConversationClosed(f"the conversation is closed: {why}") from None
        raise RetinueError(f"the steering was refused: {why}") from None
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:  # (none, or it has closed)
            return None
        raise TemporalUnavailable(f"Temporal: {exc.message}") from exc
