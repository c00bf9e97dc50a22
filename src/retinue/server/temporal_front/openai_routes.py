"""The OpenAI-compatible routes of the front end: ``/v1/models`` and
``/v1/chat/completions`` (the main agent, or one one-shot run of ``retinue/<role>``)."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

from fastapi import FastAPI, Header, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.exceptions import HTTPException

from retinue.engine.config import RunOutput
from retinue.events import (
    EventSink,
)
from retinue.server.conversations import agent_id_for, valid_conversation_id
from retinue.server.openai_api import (
    HEADER,
    MODEL,
    ChatRequest,
    _Completion,
    _model,
    _Turn,
    refusal,
    transcript,
)
from retinue.server.openai_errors import openai_error
from retinue.server.temporal_front.front import TemporalFront, front_status, outside, tenant_of
from retinue.subagents.roles import valid_name
from retinue.temporal.client import (
    role_run_agent,
)


def add_openai_routes(app: FastAPI, front: TemporalFront) -> None:
    @app.get("/v1/models")
    async def list_models() -> dict[str, Any]:
        return {"object": "list", "data": [_model(MODEL)]}

    @app.post("/v1/chat/completions", response_model=None)
    async def chat_completions(
        body: ChatRequest,
        request: Request,
        response: Response,
        x_retinue_conversation: str | None = Header(default=None, max_length=200),
    ) -> dict[str, Any] | StreamingResponse | JSONResponse:
        if (refused := refusal(body)) is not None:
            return JSONResponse(openai_error(400, refused[1], refused[0]), status_code=400)
        role = _role_of(body.model)
        *earlier, last = body.messages
        if last.role != "user" or not last.text.strip() or last.media():
            raise HTTPException(
                400,
                "the last message must be the user's, as text: it is "
                "the new turn (images and files do not reach Temporal yet)",
            )
        tenant = tenant_of(request, front)
        if role is not None:  # (a conversation of its own, not kept, as in-process)
            turn = _role_turn(front, tenant, role, transcript(earlier, last.text)
                              if earlier else last.text)  # fmt: skip
        else:
            turn = await _main_turn(front, tenant, body, x_retinue_conversation)
        chat = _Completion(body.model, turn.conversation, _same)
        headers = {HEADER: turn.conversation} if turn.conversation else {}
        if body.stream:
            usage = body.stream_options is not None and body.stream_options.include_usage
            return StreamingResponse(
                chat.stream(turn, front_status, usage),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", **headers},
            )
        out = await turn.start(None)
        response.headers.update(headers)
        return chat.completion(out)


def _role_of(model: str) -> str | None:
    """The role a ``retinue/<role>`` model names (None: ``retinue``, the main agent); 404
    for any other. Which roles exist, the workers know: one they do not is 404 before its
    run starts (the ``run_role`` Update's open activity refuses it: ``UnknownRole``)."""
    if model == MODEL:
        return None
    role = model.removeprefix(f"{MODEL}/")
    if model.startswith(f"{MODEL}/") and valid_name(role):
        return role
    raise HTTPException(404, f"model {model[:200]!r} not found (models: {MODEL}, "
                        f"{MODEL}/<role> for a role the workers know)")  # fmt: skip


async def _main_turn(
    front: TemporalFront, tenant: str, body: ChatRequest, header: str | None
) -> _Turn:
    """A turn of the main agent: of the conversation the header names, or of a new one."""
    if header is not None and not valid_conversation_id(header):
        raise HTTPException(400, f"bad {HEADER} header {header!r}")
    cid = header or f"oai-{secrets.token_hex(16)}"
    *earlier, last = body.messages
    text = last.text
    if earlier and (header is None or await front.history(tenant, cid) is None):
        text = transcript(earlier, text)

    def start(sink: EventSink | None) -> asyncio.Task[RunOutput]:
        return front.start(tenant, cid, text, on_event=sink)

    agent = agent_id_for(cid)
    return _Turn(cid, lambda a: a == agent, start)


def _role_turn(front: TemporalFront, tenant: str, role: str, task: str) -> _Turn:
    """A one-shot run of ``role`` on ``task``, in a conversation of its own whose workflow
    ends with it (no conversation is kept, and none is named: the client's list carries the
    chat)."""
    cid = f"oai-{secrets.token_hex(16)}"
    agent = outside(role_run_agent(tenant, cid, role).agent_id, cid)

    def start(sink: EventSink | None) -> asyncio.Task[RunOutput]:
        return front.start(tenant, cid, task, on_event=sink, role=role)

    return _Turn(None, lambda a: a == agent, start)


def _same(data: Any) -> Any:
    return data
