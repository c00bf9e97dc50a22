"""The HTTP service: conversations with the main agent, and live sub-agent sessions.

Endpoints (JSON in and out; every error is ``{"error": "<one line>"}``). Every endpoint
but ``/healthz`` needs ``Authorization: Bearer <token>``; Host, Origin and body size are
checked first (see :mod:`retinue.server.security`)::

    GET    /healthz                                   liveness, model, counts
    GET    /v1/conversations                          conversations, live or stored, the
                                                      latest first: id, title (first user
                                                      message), messages, updated_at, running,
                                                      and the question it asks, if any
    GET    /v1/conversations/{id}                     its history: {"id", "messages": [...],
                                                      "running", "question"}
    POST   /v1/conversations/{id}/messages            one main-agent turn (or the answer to
           body {"content": str, "keep_sessions": bool = false,   its question: that turn
                 "parts": [{"type": "image"|"document",   goes on; stop_reason "asking" = a
                            "media_type", "data": base64, "name"}]}   question)
           ?stream=true or Accept: text/event-stream  -> SSE (see ``retinue.server.sse``)
    POST   /v1/conversations/{id}/messages/upload     the same, as multipart/form-data: fields
           content, keep_sessions; files "files"      (images and PDFs, each as uploaded)
    DELETE /v1/conversations/{id}                     end its sessions, forget it (stored
                                                      history included)
    GET    /v1/conversations/{id}/approvals           calls of its agents, at any depth, that
                                                      wait for a person's yes (their turns wait)
    POST   /v1/conversations/{id}/approvals/{aid}     answer one: that call runs (allow) or the
           body {"allow": bool, "always": bool = false, "message": str = ""}   model reads
                                                      the refusal; the same turn goes on
    GET    /v1/sessions[?parent=AGENT_ID][&team=ID]   live interactive sessions, and "tasks":
                                                      the shared task lists of their trees
                                                      (and of main agent ``team``) by its id;
                                                      with durable sessions, "recorded": those
                                                      recorded but not loaded in this process
    GET    /v1/sessions/{session_id}                  one session with its history (live, or
                                                      as recorded: durable sessions)
    POST   /v1/sessions/{session_id}/interrupt        cancel its running turn, keep it
    POST   /v1/sessions/{session_id}/answer           answer the question it asks (state
           body {"content": str}                      "asking"); 409 if it asks none
    POST   /v1/sessions/{session_id}/steer            give its running turn a message before
           body {"content": str}                      its next model call; 409 if none runs
    GET    /v1/sessions/{session_id}/transcript       its latest kept transcript (ended
                                                      sessions: see
                                                      :mod:`retinue.server.transcripts`, with
                                                      /v1/transcripts and its search)
    GET    /v1/models                                 OpenAI-compatible: "retinue", "retinue/<role>"
    POST   /v1/chat/completions                       OpenAI-compatible chat (streaming or not):
                                                      see :mod:`retinue.server.openai_api`

Conversation ``abc`` is served by the main agent ``conv-abc``; its sessions are
``conv-abc/<role>[:instance]`` (the ``/`` needs no escaping in session URLs).

**Tenants.** Each token is a tenant (see :mod:`retinue.server.tokens` and
:mod:`retinue.server.tenants`): every route above but ``/healthz`` and ``/v1/models`` shows
and changes only the tenant's own conversations and sessions (another tenant's are 404, as
if they did not exist), and its agents use the tenant's memory. ``/healthz`` answers from
counters, never reading a session's files, so it costs the same however many sessions live.
Status codes: 400 bad request or a refused turn (a corrupt image, an unsupported media
type), 401 no or a wrong token, 403 a foreign Origin, 404 unknown conversation or session,
409 conversation deleted during the turn, 413 body or file too large, 421 a Host not
allowed, 422 malformed body, 429 too many turns in progress, 502 the model provider failed,
507 no room left for images and PDFs in the store (``media_max_bytes``). Idle
conversations are evicted (see :class:`~retinue.server.conversations.Limits`); histories
are stored and survive a restart (see :mod:`retinue.server.conversations`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import asdict
from typing import Annotated, Any, Literal

from fastapi import FastAPI, File, Form, Request, UploadFile
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException

from retinue.errors import MediaError, MemoryStoreError, ModelError, RetinueError
from retinue.messages import (
    MAX_MEDIA_BYTES,
    Content,
    MediaPart,
    UserMessage,
    from_dict,
    media_part,
    shown_dict,
)
from retinue.policy.approvals import Approval
from retinue.runtime import Runtime
from retinue.server.conversations import (
    ConversationGone,
    Limits,
    ServerBusy,
    question_in,
    valid_conversation_id,
)
from retinue.server.hub import EventHub
from retinue.server.openai_api import MAX_PARTS, openai_router
from retinue.server.openai_errors import is_openai_path, openai_error
from retinue.server.page import add_page_routes
from retinue.server.security import DEFAULT_MAX_BODY, Guard, Security
from retinue.server.sse import output_json, stream_turn
from retinue.server.tenants import Space, Spaces, TenantSpace
from retinue.server.transcripts import transcript_routes
from retinue.store.journal import SessionRecord
from retinue.store.media import MediaStoreFull
from retinue.subagents.messaging import messenger_of
from retinue.subagents.registry import SessionInfo
from retinue.subagents.tasklist import task_lists
from retinue.telemetry.trace import RemoteParent

__all__ = [
    "MessageIn",
    "check_conversation_id",
    "create_app",
    "error_handlers",
    "error_status",
]


log = logging.getLogger("retinue.server")


class PartIn(BaseModel):
    """An image or PDF sent with a message, as a stored message holds it (base64 bytes)."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["image", "document"]
    media_type: str = Field(max_length=100)
    data: str = Field(max_length=MAX_MEDIA_BYTES * 4 // 3 + 4)
    name: str = Field(default="", max_length=200)


class MessageIn(BaseModel):
    """The body of ``POST /v1/conversations/{id}/messages``: its text, and ``parts`` (images
    and PDFs, base64) after it."""

    model_config = ConfigDict(extra="forbid")
    content: str = Field(min_length=1, max_length=DEFAULT_MAX_BODY)
    keep_sessions: bool = False
    parts: list[PartIn] = Field(default_factory=list[PartIn], max_length=MAX_PARTS)

    def message(self) -> Content:
        """The content to send; ``HTTPException`` 400 (one line) for a bad part."""
        if not self.parts:
            return self.content
        row = {"role": "user", "content": "", "parts": [p.model_dump() for p in self.parts]}
        try:
            sent = from_dict(row)  # (the stored form's checks: type, first bytes, size)
        except ValueError as exc:  # MediaError is a ValueError
            raise HTTPException(400, f"bad part: {exc}") from None
        return [self.content, *(sent.parts if isinstance(sent, UserMessage) else ())]


def create_app(runtime: Runtime, security: Security, limits: Limits | None = None) -> FastAPI:
    """The service for ``runtime``, behind ``security``; it becomes the runtime's event
    sink's fan-out point."""
    hub = EventHub(runtime.events)
    runtime.events = hub
    spaces = Spaces(runtime, hub, limits)
    host = spaces.own.host

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        evictor = asyncio.create_task(host.evict_forever(spaces.others))
        try:
            yield
        finally:
            evictor.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await evictor
            for space in spaces:
                await space.host.close_all()

    app = FastAPI(title="Retinue", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.add_middleware(Guard, security=security)
    app.add_middleware(RemoteParent)  # a request's traceparent: its turns join that trace
    app.state.runtime, app.state.host, app.state.spaces = runtime, host, spaces
    error_handlers(app)
    _conversation_routes(app)
    transcript_routes(app)  # (before /v1/sessions/{id:path}, which would take its paths)
    _session_routes(app, runtime)
    add_page_routes(app)
    app.include_router(openai_router(runtime, error_status))
    return app


def error_status(exc: BaseException) -> tuple[int, str]:
    """The HTTP status and one-line message for an error a turn raised."""
    if isinstance(exc, ConversationGone):
        return 409, str(exc)
    if isinstance(exc, ServerBusy):
        return 429, str(exc)
    if isinstance(exc, MediaStoreFull):  # (a MemoryStoreError)
        return 507, str(exc)
    if isinstance(exc, ModelError):
        return 502, str(exc)
    if isinstance(exc, MemoryStoreError):  # the store (its database) failed, not the request
        return 503, str(exc)
    if isinstance(exc, RetinueError):
        return 400, str(exc)
    return 500, f"internal error: {type(exc).__name__}: {exc}"


def _error(status: int, message: str, request: Request | None = None) -> JSONResponse:
    """``{"error": message}``; on the OpenAI-compatible routes, OpenAI's error object."""
    if request is not None and is_openai_path(request.url.path):
        return JSONResponse(openai_error(status, message), status_code=status)
    return JSONResponse({"error": message}, status_code=status)


def error_handlers(
    app: FastAPI, status_of: Callable[[BaseException], tuple[int, str]] = error_status
) -> None:
    """Every error ``app`` answers as one JSON line (OpenAI's error object on its routes):
    HTTP errors, a body that does not validate (what is wrong, never the input), Retinue's
    errors with the status ``status_of`` gives them, and anything else as a 500 (logged
    here, never a trace in the answer). The service's, and the Temporal front end's."""

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        return _error(exc.status_code, str(exc.detail), request)

    @app.exception_handler(RequestValidationError)
    async def bad_body(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [
            f"{'.'.join(str(p) for p in e.get('loc', ()) if p != 'body') or 'body'}: "
            f"{e.get('msg', 'invalid')}"
            for e in exc.errors()
        ]
        return _error(422, "invalid request: " + "; ".join(problems), request)

    @app.exception_handler(ConversationGone)
    @app.exception_handler(ServerBusy)
    @app.exception_handler(RetinueError)
    async def turn_error(request: Request, exc: Exception) -> JSONResponse:
        return _error(*status_of(exc), request)

    @app.exception_handler(Exception)
    async def internal(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error")
        return _error(*status_of(exc), request)


class ApprovalIn(BaseModel):
    """The body of ``POST /v1/conversations/{id}/approvals/{aid}``."""

    model_config = ConfigDict(extra="forbid")
    allow: bool
    always: bool = False
    message: str = Field(default="", max_length=2000)


class AnswerIn(BaseModel):
    """The body of ``POST /v1/sessions/{id}/answer``."""

    model_config = ConfigDict(extra="forbid")
    content: str = Field(min_length=1)


def check_conversation_id(cid: str) -> None:
    """400 for a conversation id that is not 1-64 letters, digits, ``_ . -`` (the answer
    quotes its start only: a request may send kilobytes of it)."""
    if not valid_conversation_id(cid):
        raise HTTPException(
            400, f"bad conversation id {cid[:80]!r}: use 1-64 letters, digits, '_', '.', '-'"
        )


def _conversation_routes(app: FastAPI) -> None:
    check = check_conversation_id

    @app.get("/v1/conversations")
    async def list_conversations(space: Space) -> dict[str, Any]:
        return {"conversations": [asdict(v) for v in await space.host.views()]}

    @app.get("/v1/conversations/{cid}")
    async def get_conversation(cid: str, space: Space) -> dict[str, Any]:
        check(cid)
        host = space.host
        history = await host.history(cid)
        if history is None:
            raise HTTPException(404, f"no conversation {cid!r}")
        return {
            "id": cid,
            "messages": space.shown([shown_dict(m) for m in history]),
            "running": host.running(cid),
            "question": host.question(cid) or question_in(history),  # stored: any worker
            "approvals": [a.to_dict() for a in await host.approvals(cid)],
        }

    @app.get("/v1/conversations/{cid}/approvals")
    async def list_approvals(cid: str, space: Space) -> dict[str, Any]:
        check(cid)
        return {"approvals": [a.to_dict() for a in await space.host.approvals(cid)]}

    @app.post("/v1/conversations/{cid}/approvals/{aid}")
    async def answer_approval(cid: str, aid: str, body: ApprovalIn, space: Space) -> dict[str, Any]:
        check(cid)
        approval = Approval(body.allow, always=body.allow and body.always, message=body.message)
        if not await space.host.approve(cid, aid, approval):
            raise HTTPException(404, f"no pending approval {aid!r} in conversation {cid!r}")
        return {"answered": aid, "allow": body.allow}

    async def turn(
        cid: str, content: Content, keep: bool, request: Request, space: Space, stream: bool
    ) -> dict[str, Any] | StreamingResponse:
        check(cid)
        if stream or "text/event-stream" in request.headers.get("accept", ""):
            await space.host.check_media_room(content)  # (507 before the stream begins)
            events = stream_turn(space, cid, content, keep_sessions=keep, errors=error_status)
            return StreamingResponse(
                events, media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
            )
        out = await space.host.send(cid, content, keep_sessions=keep)
        return space.shown(output_json(out))

    @app.post("/v1/conversations/{cid}/messages", response_model=None)
    async def post_message(
        cid: str, body: MessageIn, request: Request, space: Space, stream: bool = False
    ) -> dict[str, Any] | StreamingResponse:
        return await turn(cid, body.message(), body.keep_sessions, request, space, stream)

    @app.post("/v1/conversations/{cid}/messages/upload", response_model=None)
    async def post_upload(
        cid: str,
        request: Request,
        space: Space,
        content: Annotated[str, Form(min_length=1, max_length=DEFAULT_MAX_BODY)],
        files: Annotated[list[UploadFile], File(description="images and PDFs")],
        keep_sessions: Annotated[bool, Form()] = False,
        stream: bool = False,
    ) -> dict[str, Any] | StreamingResponse:
        """One main-agent turn, its images and PDFs uploaded as files (multipart/form-data);
        otherwise as ``POST /v1/conversations/{id}/messages``."""
        if len(files) > MAX_PARTS:
            raise HTTPException(400, f"{len(files)} files: at most {MAX_PARTS} in one message")
        parts = [await uploaded(f) for f in files]
        return await turn(cid, [content, *parts], keep_sessions, request, space, stream)

    @app.delete("/v1/conversations/{cid}")
    async def delete_conversation(cid: str, space: Space) -> dict[str, Any]:
        check(cid)
        ended = await space.host.delete(cid)
        if ended is None:
            raise HTTPException(404, f"no conversation {cid!r}")
        return {"deleted": cid, "ended_sessions": [space.outside(s) for s in ended]}


async def uploaded(file: UploadFile) -> MediaPart:
    """An uploaded file as an image or PDF part (its type as sent, else read from its first
    bytes); ``HTTPException`` 413 or 400 (one line) for a file too large or not taken."""
    name = (file.filename or "")[:200]
    data = await file.read(MAX_MEDIA_BYTES + 1)
    if len(data) > MAX_MEDIA_BYTES:
        raise HTTPException(413, f"file {name!r} is over {MAX_MEDIA_BYTES:,} bytes")
    sent = (file.content_type or "").split(";")[0].strip().lower()
    media_type = "" if sent in ("", "application/octet-stream") else sent
    try:
        return media_part(data, media_type, name)
    except MediaError as exc:
        raise HTTPException(400, f"bad file {name!r}: {exc}") from None


def record_json(record: SessionRecord, space: TenantSpace) -> dict[str, Any]:
    """A recorded session (durable sessions) as the sessions endpoints show it."""
    return space.shown({
        "id": record.id, "parent_id": record.parent_id, "role": record.role,
        "instance": record.instance, "kind": record.kind, "state": record.state,
        "turns": record.turns, "question": record.question, "unread": len(record.inbox),
        "updated_at": record.updated_at, "loaded": False,
    })  # fmt: skip


def session_json(info: SessionInfo, space: TenantSpace | None = None) -> dict[str, Any]:
    data = {**asdict(info), "tokens": info.tokens}
    return space.shown(data) if space is not None else data


def _session_routes(app: FastAPI, runtime: Runtime) -> None:
    manager = runtime.manager

    def known(sid: str, space: TenantSpace) -> str:
        """The internal id of the caller's live session ``sid``, or 404."""
        info = space.held(sid)
        if info is None:
            live = ", ".join(space.outside(s.id) for s in space.sessions()) or "none"
            raise HTTPException(404, f"no live session {sid!r} (live sessions: {live})")
        return info.id

    @app.get("/healthz")
    async def healthz() -> dict[str, Any]:  # counts only: no session's files are read
        sessions = len(manager.registry.held_by())
        return {"status": "ok", "model": runtime.model.name, "sessions": sessions}

    @app.get("/v1/sessions")
    async def list_sessions(
        space: Space, parent: str | None = None, team: str | None = None
    ) -> dict[str, Any]:
        infos = space.sessions(parent)
        root = messenger_of(manager.registry).root_of
        asked = [space.inside(a) for a in (parent, team) if a]
        teams = [*(root(a) for a in asked if a is not None), *(root(s.id) for s in infos)]
        lists = await task_lists(space.runtime.memory, space.tenant, teams)
        tasks = {space.outside(t): space.shown([asdict(x) for x in ts]) for t, ts in lists.items()}
        live = {s.id for s in space.runtime.manager.registry.held_by()}
        recorded = [record_json(r, space) for r in await space.host.records()
                    if r.kind != "main" and r.id not in live
                    and (parent is None or r.parent_id == space.inside(parent))]  # fmt: skip
        shown = {"sessions": [session_json(s, space) for s in infos], "tasks": tasks}
        return {**shown, "recorded": recorded} if space.host.journal is not None else shown

    @app.get("/v1/sessions/{sid:path}")
    async def get_session(sid: str, space: Space) -> dict[str, Any]:
        inner = space.inside(sid)
        found = await space.host.recorded(inner) if inner and space.held(sid) is None else None
        if found is not None:  # durable: recorded, not loaded here
            record, messages = found
            history = space.shown([shown_dict(m) for m in messages])
            return {**record_json(record, space), "history": history}
        inner = known(sid, space)
        info = manager.session(inner)
        if info is None:
            raise HTTPException(404, f"no live session {sid!r}")
        history = space.shown([shown_dict(m) for m in manager.history(inner)])
        return {**session_json(info, space), "history": history}

    @app.post("/v1/sessions/{sid:path}/interrupt")
    async def interrupt(sid: str, space: Space) -> dict[str, Any]:
        return {"id": sid, "interrupted": manager.interrupt(known(sid, space))}

    def delivered(sid: str, done: bool, what: str, refusal: str) -> dict[str, Any]:
        if not done:
            raise HTTPException(409, f"session {sid!r} {refusal}")
        return {"id": sid, what: True}

    async def acted(sid: str, space: Space, act: Callable[[str], bool]) -> bool:
        """``act`` on the caller's session ``sid``: live here, else recorded (durable
        sessions: its tree is loaded first), else 404."""
        inner = space.inside(sid)
        if inner is not None and space.held(sid) is None:
            done = await space.host.act_on_session(inner, lambda: act(inner))
            if done is not None:
                return done
        return act(known(sid, space))

    @app.post("/v1/sessions/{sid:path}/answer")
    async def answer(sid: str, body: AnswerIn, space: Space) -> dict[str, Any]:
        done = await acted(sid, space, lambda inner: manager.answer(inner, body.content))
        return delivered(sid, done, "answered", "is not asking a question")

    @app.post("/v1/sessions/{sid:path}/steer")
    async def steer(sid: str, body: AnswerIn, space: Space) -> dict[str, Any]:
        done = await acted(sid, space, lambda inner: manager.steer_session(inner, body.content))
        return delivered(sid, done, "steered", "has no running turn to steer")
