"""The front end's service: the conversation routes, and the app that gathers them with
the sessions' (:mod:`.sessions`), the kept transcripts' (:mod:`retinue.server.transcripts`,
with the workers' store), the OpenAI-compatible ones (:mod:`.openai_routes`) and the web
page."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Header, Request
from fastapi.responses import StreamingResponse
from starlette.exceptions import HTTPException

from retinue.engine.config import RunOutput
from retinue.events import (
    EventSink,
)
from retinue.messages import (
    shown_dict,
)
from retinue.server.app import (
    ApprovalIn,
    MessageIn,
    check_conversation_id,
    error_handlers,
)
from retinue.server.page import add_page_routes
from retinue.server.security import Guard, Security
from retinue.server.sse import TurnFeed, frame, output_json
from retinue.server.temporal_front.front import (
    TemporalFront,
    front_status,
    tenant_of,
    transcript_reader,
)
from retinue.server.temporal_front.openai_routes import add_openai_routes
from retinue.server.temporal_front.sessions import add_session_routes
from retinue.server.transcripts import transcript_routes
from retinue.telemetry.trace import RemoteParent


def create_temporal_app(front: TemporalFront, security: Security) -> FastAPI:
    """The front end's service: ``front``'s conversations behind ``security``."""
    app = FastAPI(title="Retinue (Temporal front end)", docs_url=None, redoc_url=None)
    app.add_middleware(Guard, security=security)
    app.add_middleware(RemoteParent)  # (a request's traceparent: its turns join that trace)
    app.state.front = front

    error_handlers(app, front_status)  # (the service's: one JSON line, never a trace)

    _front_routes(app, front)
    add_openai_routes(app, front)
    add_page_routes(app)
    return app


_check = check_conversation_id  # (the service's)


def _text_only(body: MessageIn) -> str:
    """The message's text (``keep_sessions`` is moot: a session is a child workflow that
    lives across turns until it is unloaded or the conversation ends)."""
    if body.parts:
        raise HTTPException(400, "images and PDFs do not reach Temporal workflows yet: send text")
    return body.content


def _front_routes(app: FastAPI, front: TemporalFront) -> None:
    @app.get("/healthz")
    async def healthz() -> dict[str, Any]:
        return {"status": "ok", "model": "temporal", "sessions": 0}

    @app.get("/v1/conversations")
    async def list_conversations(request: Request) -> dict[str, Any]:
        return {"conversations": await front.views(tenant_of(request, front))}

    @app.get("/v1/conversations/{cid}")
    async def get_conversation(cid: str, request: Request) -> dict[str, Any]:
        _check(cid)
        tenant = tenant_of(request, front)
        history = await front.history(tenant, cid)
        state = await front.state(tenant, cid) if history is not None else None
        if history is None or state is None:
            raise HTTPException(404, f"no conversation {cid!r}")
        messages = [shown_dict(m) for m in history]
        return {"id": cid, "messages": messages, "running": state["running"],
                "question": state["question"], "approvals": state["approvals"]}  # fmt: skip

    @app.get("/v1/conversations/{cid}/approvals")
    async def list_approvals(cid: str, request: Request) -> dict[str, Any]:
        _check(cid)
        state = await front.state(tenant_of(request, front), cid)
        return {"approvals": state["approvals"] if state is not None else []}

    @app.post("/v1/conversations/{cid}/approvals/{aid:path}")  # (ids hold "/")
    async def answer_approval(
        cid: str, aid: str, body: ApprovalIn, request: Request
    ) -> dict[str, Any]:
        _check(cid)
        tenant = tenant_of(request, front)
        if not await front.approve(tenant, cid, aid, allow=body.allow, message=body.message,
                                   always=body.always):  # fmt: skip
            raise HTTPException(404, f"no pending approval {aid!r} in conversation {cid!r}")
        return {"answered": aid, "allow": body.allow}

    @app.post("/v1/conversations/{cid}/messages", response_model=None)
    async def post_message(
        cid: str,
        body: MessageIn,
        request: Request,
        stream: bool = False,
        idempotency_key: str | None = Header(default=None, max_length=200),
    ) -> dict[str, Any] | StreamingResponse:
        _check(cid)
        tenant, text = tenant_of(request, front), _text_only(body)
        key = f"msg-{idempotency_key}" if idempotency_key else None
        if stream or "text/event-stream" in request.headers.get("accept", ""):

            def start(sink: EventSink) -> asyncio.Task[RunOutput]:
                return front.start(tenant, cid, text, on_event=sink, message_id=key)

            return StreamingResponse(
                _stream(TurnFeed(start)),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache"},
            )
        return output_json(await front.start(tenant, cid, text, message_id=key))

    @app.delete("/v1/conversations/{cid}")
    async def delete_conversation(cid: str, request: Request) -> dict[str, Any]:
        _check(cid)
        if not await front.delete(tenant_of(request, front), cid):
            raise HTTPException(404, f"no conversation {cid!r}")
        return {"deleted": cid, "ended_sessions": []}

    if front.transcripts is not None:  # (before the sessions' /v1/sessions/{id:path})
        transcript_routes(app, lambda request: transcript_reader(request, front))
    add_session_routes(app, front)


async def _stream(feed: TurnFeed) -> AsyncIterator[str]:
    """A turn's events as SSE frames, then its result (or its error)."""
    try:
        async for event in feed.events():
            yield frame(event.kind, event.to_dict())
        outcome = feed.outcome(front_status)
        if isinstance(outcome, RunOutput):
            yield frame("result", output_json(outcome))
        else:
            yield frame("error", {"error": outcome[1], "status": outcome[0]})
    finally:
        feed.close()
