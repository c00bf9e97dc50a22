"""The OpenAI-compatible endpoint: Retinue as a "model" any Chat Completions client can use.

::

    GET  /v1/models              "retinue", and "retinue/<role>" for every known role
    GET  /v1/models/{model}      one of them
    POST /v1/chat/completions    one turn; "stream": true answers with SSE chunks

Both need a bearer token (the service's, or a named one: each token is a tenant and sees
only its own conversations), which is what ``OpenAI(api_key=token, base_url=
"http://127.0.0.1:8765/v1")`` sends. Every error from these routes, the front door's
refusals included (401 without the token, 413 for a huge body), is one-line JSON in OpenAI's
shape (see :mod:`retinue.server.openai_errors`), so the SDK raises its usual exceptions with
the message. A failure after a stream began is a last chunk ``data: {"error": {...}}`` of
the same shape, which the SDK raises as an ``APIError``.

**What is refused.** A request's ``tools`` (or ``functions``: client-side function tools)
are refused with 400: Retinue's agents run their own tools and would never call the
client's. ``n`` above 1 is refused with 400: a turn has one answer. Sampling settings are
accepted and unused.

**Images and files.** The new user message may carry images (PNG, JPEG, GIF, WebP) and
PDFs: ``image_url`` parts and ``file`` parts with ``file_data`` (Chat Completions), or
``input_image`` / ``input_file`` (the Responses spellings), each a base64 ``data:`` URL of
at most 20 MB; they go to the main agent (``model: "retinue"``). The server fetches
nothing: an http(s) URL, an uploaded file id, a corrupt image, another media type or
another part type is a one-line 400 and nothing runs.

**Which conversation.** The client's message list is the conversation; its last message
must be the user's, and it is the new turn. Conversations are joined only by what a client
sends on purpose, never by the content of its messages:

* With a header ``X-Retinue-Conversation: <id>``, the turn goes to that conversation of the
  token's tenant (the same as ``POST /v1/conversations/<id>/messages``), whose stored
  history is authoritative: the earlier messages of the list are not read again. Every
  response names its conversation in that header (and in ``retinue.conversation``), so a
  client keeps a chat by echoing it.
* Without it, the request is a conversation of its own, ``oai-<random>`` (Chat Completions
  is stateless): two clients that send the same messages never share one.
* A new conversation whose list holds earlier messages (system messages, a chat begun
  elsewhere, or every request without the header) gets them as a transcript before the new
  message, system messages as the client's instructions, so nothing the user saw is lost.
* A turn's interactive sub-agent sessions end with the turn, unless the request also sends
  ``X-Retinue-Keep-Sessions: true`` (with the conversation header): then they are kept for
  that conversation's next requests, as ``keep_sessions`` does on the conversation routes.

**Which agent.** ``model: "retinue"`` talks to the main agent, which delegates to
sub-agents as it sees fit. ``model: "retinue/<role>"`` hands the conversation to that role
directly, as one one-shot delegation: the role's sub-agent gets the transcript and the last
message as its task, answers, and its memory is consolidated; no Retinue conversation is
kept (the client's list carries the chat).

**Extra fields.** Each chunk and each completion may carry ``"retinue": {...}``, which
plain clients ignore: the progress events of the agent tree as ``{"event": <event>}``
chunks with an empty delta (each event as in :mod:`retinue.server.sse`), and on the
completion (or the last chunk) ``{"conversation", "stop_reason", "tools_used"}``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import secrets
import time
from collections.abc import AsyncIterator, Callable
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any, Literal

from fastapi import APIRouter, Header, Response
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException

from retinue.engine.config import RunOutput
from retinue.events import TEXT_DELTA, TOOL_STARTED, EventSink
from retinue.llm._media import chat_media, responses_media
from retinue.messages import Content, MediaPart
from retinue.runtime import Runtime
from retinue.server.conversations import ServerBusy, valid_conversation_id
from retinue.server.openai_errors import openai_error
from retinue.server.security import DEFAULT_MAX_BODY
from retinue.server.sse import ErrorMapper, TurnFeed, jsonable
from retinue.server.tenants import Space, TenantSpace

__all__ = ["MAX_PARTS", "ChatRequest", "openai_router"]

MODEL = "retinue"
HEADER = "X-Retinue-Conversation"
KEEP_HEADER = "X-Retinue-Keep-Sessions"
_FINISH = {"max_iterations": "length"}
MAX_PARTS = 20
"""Images and files one message may carry (here: one request, its earlier messages' too)."""
MAX_TEXT = DEFAULT_MAX_BODY
"""Characters of text a request's messages may hold in all."""
_role_runs = itertools.count(1)


_TEXT_PARTS = ("text", "input_text")
_MEDIA_PARTS = ("image_url", "file", "input_image", "input_file")


class ContentPart(BaseModel):
    """One part of a message's content: ``text``, ``image_url`` or ``file`` (a base64 data
    URL each: the server fetches nothing), or the Responses spellings ``input_text``,
    ``input_image`` and ``input_file``; any other part of the new message is refused."""

    model_config = ConfigDict(extra="allow")
    type: str = Field(max_length=64)
    text: str | None = None


class ChatMessage(BaseModel):
    """One message of the client's list (other fields, e.g. ``tool_calls``, are ignored)."""

    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = None

    @property
    def text(self) -> str:
        if isinstance(self.content, list):
            return "\n".join(p.text for p in self.content if p.type in _TEXT_PARTS and p.text)
        return self.content or ""

    @property
    def media_count(self) -> int:
        """How many of the content's parts are images or files."""
        content = self.content if isinstance(self.content, list) else []
        return sum(p.type in _MEDIA_PARTS for p in content)

    def media(self) -> tuple[MediaPart, ...]:
        """The images and PDFs of the content; ``HTTPException`` 400 (one line) for a part
        that is not a base64 data URL of a PNG, JPEG, GIF, WebP or PDF, or is too large."""
        if not isinstance(self.content, list):
            return ()
        found: list[MediaPart] = []
        for p in self.content:
            if p.type in _TEXT_PARTS:
                continue
            if p.type not in _MEDIA_PARTS:
                raise HTTPException(400, f"unsupported content part {p.type[:64]!r}: "
                                    "text, image_url and file parts only")  # fmt: skip
            found.append(_media(p))
        return tuple(found)


def _media(p: ContentPart) -> MediaPart:
    """The image or PDF of a media part, or ``HTTPException`` 400 (one line)."""
    raw = p.model_dump()
    if p.type == "image_url" and isinstance(raw.get("image_url"), str):
        raw["image_url"] = {"url": raw["image_url"]}  # (a spelling some clients send)
    given = raw.get("file") if p.type == "file" else raw
    if p.type in ("file", "input_file") and isinstance(given, dict) and "file_data" not in given:
        raise HTTPException(400, f"bad {p.type} part: give file_data (a base64 data URL); "
                            "uploaded file ids and file URLs are not fetched here")  # fmt: skip
    try:
        part = chat_media(raw) if p.type in ("image_url", "file") else responses_media(raw)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:  # MediaError: ValueError
        raise HTTPException(400, f"bad {p.type} part: {_line(exc)}") from None
    if part is None:
        raise HTTPException(400, f"bad {p.type} part: no image or file in it")
    return part


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: bool = False


class ChatRequest(BaseModel):
    """The body of ``POST /v1/chat/completions``. Sampling settings are accepted and unused;
    ``tools``, ``functions`` and ``n`` > 1 are refused (see :func:`refusal`)."""

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={
            "examples": [
                {"model": "retinue", "messages": [{"role": "user", "content": "Hello"}]},
                {
                    "model": "retinue",
                    "messages": [{"role": "user", "content": "Hello"}],
                    "stream": True,
                    "stream_options": {"include_usage": True},
                },
            ]
        },
    )
    model: str = Field(min_length=1, max_length=200)
    messages: list[ChatMessage] = Field(min_length=1, max_length=10_000)
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int | None = None
    tools: list[Any] | None = None
    functions: list[Any] | None = None


def refusal(body: ChatRequest) -> tuple[str, str] | None:
    """What of ``body`` this endpoint does not do, as (the field, why), or None."""
    for field in ("tools", "functions"):
        if getattr(body, field):
            return field, (
                f"'{field}' is not supported: Retinue's agents run their own tools and never "
                "call a client's function tools; send the request without them"
            )
    if body.n is not None and body.n != 1:
        return "n", f"'n' must be 1 (got {body.n}): a Retinue turn has one answer"
    return None


def transcript(messages: list[ChatMessage], last: str) -> str:
    """The client's earlier messages and the new one, as one task text."""
    lines = ["[Earlier in this conversation, as the client sent it:]"]
    for m in messages:
        who = "instructions" if m.role in ("system", "developer") else m.role
        attached = m.media_count if m.role == "user" else 0
        also = f" [+{attached} attached: after this transcript]" if attached else ""
        lines.append(f"[{who}] {m.text}{also}")
    lines += ["", "[The new message:]", last]
    return "\n".join(lines)


@dataclass(slots=True)
class _Turn:
    """One request's turn: how to start it, and whose text deltas are the answer's."""

    conversation: str | None
    speaker: Callable[[str], bool]
    start: Callable[[EventSink | None], asyncio.Task[RunOutput]]


def openai_router(runtime: Runtime, errors: ErrorMapper) -> APIRouter:
    """The routes of the OpenAI-compatible endpoint (see the module docstring)."""
    router = APIRouter()
    running: set[asyncio.Task[RunOutput]] = set()  # role runs

    def models() -> list[str]:
        return [MODEL, *(f"{MODEL}/{r}" for r in sorted(runtime.catalog.roles))]

    def unknown(model: str) -> HTTPException:
        return HTTPException(404, f"model {model!r} not found (models: {', '.join(models())})")

    @router.get("/v1/models")
    async def list_models() -> dict[str, Any]:
        return {"object": "list", "data": [_model(m) for m in models()]}

    @router.get("/v1/models/{model:path}")
    async def get_model(model: str) -> dict[str, Any]:
        if model not in models():
            raise unknown(model)
        return _model(model)

    def conversation_for(header: str | None) -> str:
        if header is None:
            return f"oai-{secrets.token_hex(16)}"  # stateless: a conversation of its own
        if not valid_conversation_id(header):
            raise HTTPException(
                400, f"bad {HEADER} header {header!r}: use 1-64 letters, digits, '_', '.', '-'"
            )
        return header

    async def main_turn(
        space: TenantSpace, body: ChatRequest, header: str | None, keep: bool
    ) -> _Turn:
        host = space.host
        cid = conversation_for(header)
        *earlier, last = body.messages
        text, media = last.text, last.media()
        if earlier and (header is None or await host.history(cid) is None):
            text = transcript(earlier, text)  # instructions, or a chat begun elsewhere
            media = (*(p for m in earlier if m.role == "user" for p in m.media()), *media)
        if len(media) > MAX_PARTS:
            raise HTTPException(400, f"{len(media)} images and files: at most {MAX_PARTS}")
        root = host.agent_id(cid)
        content: Content = [text, *media] if media else text

        def start(sink: EventSink | None) -> asyncio.Task[RunOutput]:
            keeps = keep and header is not None
            return host.start(cid, content, keep_sessions=keeps, on_event=sink)

        return _Turn(cid, lambda agent: agent == root, start)

    def role_turn(space: TenantSpace, body: ChatRequest, role: str) -> _Turn:
        host = space.host
        if len(running) >= host.limits.max_turns:
            raise ServerBusy(f"{host.limits.max_turns} role runs are in progress; retry later")
        *earlier, last = body.messages
        if last.media():
            raise HTTPException(400, "images and files go to the main agent ('retinue') only")
        task_text = transcript(earlier, last.text) if earlier else last.text
        root = f"{space.prefix}oai-{role}-{next(_role_runs)}"

        async def delegate(sink: EventSink | None) -> RunOutput:
            with ExitStack() as watching:
                if sink is not None:
                    watching.enter_context(host.hub.subscribe(root, sink))
                try:
                    return await runtime.manager.run_subagent(
                        space.runtime.context(root), task_text, role
                    )
                finally:
                    await runtime.manager.cleanup(root)  # one that asked is held: end it

        def start(sink: EventSink | None) -> asyncio.Task[RunOutput]:
            task = asyncio.create_task(delegate(sink))
            running.add(task)
            task.add_done_callback(running.discard)
            return task

        def speaker(agent: str) -> bool:  # the role's own agent, not its sub-agents
            return agent.startswith(f"{root}/") and "/" not in agent[len(root) + 1 :]

        return _Turn(None, speaker, start)

    async def turn_for(
        space: TenantSpace, body: ChatRequest, header: str | None, keep: bool
    ) -> _Turn:
        text = sum(len(m.text) for m in body.messages)
        if text > MAX_TEXT:  # (the body may be larger than the other routes': images)
            raise HTTPException(413, f"request body over {MAX_TEXT:,} characters of text "
                                f"({text:,}; images and files aside)")  # fmt: skip
        if body.messages[-1].role != "user":
            raise HTTPException(400, "the last message must be the user's: it is the new turn")
        if not body.messages[-1].text.strip() and not body.messages[-1].media():
            raise HTTPException(400, "the last user message is empty: say what to do")
        if body.model == MODEL:
            return await main_turn(space, body, header, keep)
        role = body.model.removeprefix(f"{MODEL}/")
        if body.model.startswith(f"{MODEL}/") and role in runtime.catalog.roles:
            return role_turn(space, body, role)
        raise unknown(body.model)

    @router.post("/v1/chat/completions", response_model=None)
    async def chat_completions(
        body: ChatRequest,
        response: Response,
        space: Space,
        x_retinue_conversation: str | None = Header(default=None, max_length=200),
        x_retinue_keep_sessions: str | None = Header(default=None, max_length=10),
    ) -> dict[str, Any] | StreamingResponse | JSONResponse:
        if (refused := refusal(body)) is not None:
            field, why = refused
            return JSONResponse(openai_error(400, why, field), status_code=400)
        keep = (x_retinue_keep_sessions or "").strip().lower() in ("1", "true", "yes")
        turn = await turn_for(space, body, x_retinue_conversation, keep)
        headers = {HEADER: turn.conversation} if turn.conversation else {}
        chat = _Completion(body.model, turn.conversation, space.shown)
        if body.stream:
            usage = body.stream_options is not None and body.stream_options.include_usage
            return StreamingResponse(
                chat.stream(turn, errors, usage),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", **headers},
            )
        out = await turn.start(None)
        response.headers.update(headers)
        return space.shown(chat.completion(out))

    return router


def _model(name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": 0, "owned_by": "retinue"}


class _Completion:
    """The JSON of one completion, whole or as chunks."""

    def __init__(self, model: str, conversation: str | None, shown: Callable[[Any], Any]) -> None:
        self.shown = shown  # (a tenant space's ids as its clients see them)
        self.id = f"chatcmpl-{secrets.token_hex(12)}"
        self.created = int(time.time())
        self.model = model
        self.conversation = conversation

    def _base(self, kind: str) -> dict[str, Any]:
        return {"id": self.id, "object": kind, "created": self.created, "model": self.model}

    def _extra(self, out: RunOutput) -> dict[str, Any]:
        return {
            "conversation": self.conversation,
            "stop_reason": out.stop_reason,
            "tools_used": out.tools_used,
        }

    @staticmethod
    def _usage(out: RunOutput) -> dict[str, int]:
        u = out.usage
        return {
            "prompt_tokens": u.input_tokens,
            "completion_tokens": u.output_tokens,
            "total_tokens": u.total_tokens,
        }

    def completion(self, out: RunOutput) -> dict[str, Any]:
        message = {"role": "assistant", "content": out.content}
        choice = {"index": 0, "message": message, "finish_reason": _finish(out)}
        return {
            **self._base("chat.completion"),
            "choices": [choice],
            "usage": self._usage(out),
            "retinue": self._extra(out),
        }

    def chunk(
        self,
        delta: dict[str, Any],
        finish: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> str:
        data = {
            **self._base("chat.completion.chunk"),
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        if extra is not None:
            data["retinue"] = extra
        return _data(data)

    async def stream(self, turn: _Turn, errors: ErrorMapper, usage: bool) -> AsyncIterator[str]:
        feed = TurnFeed(turn.start)
        said: list[str] = []
        step_ended = False  # the speaker called tools since its last text: a paragraph break
        try:
            yield self.chunk({"role": "assistant", "content": ""})
            async for event in feed.events():
                if event.kind == TEXT_DELTA and turn.speaker(event.agent_id):
                    text = str(event.data.get("text", ""))
                    said.append(("\n\n" if step_ended and said else "") + text)
                    step_ended = False
                    yield self.chunk({"content": said[-1]})
                    continue
                step_ended = step_ended or (
                    event.kind == TOOL_STARTED and turn.speaker(event.agent_id)
                )
                yield self.chunk({}, extra={"event": self.shown(event.to_dict())})
            outcome = feed.outcome(errors)
            if not isinstance(outcome, RunOutput):
                yield _data(openai_error(*outcome))
                return
            spoken = "".join(said)
            if not spoken.endswith(outcome.content):  # not streamed (or not all of it)
                rest = ("\n\n" if spoken else "") + outcome.content
                spoken += rest
                yield self.chunk({"content": rest})
            yield self.chunk({}, _finish(outcome), self._extra(outcome))
            if usage:
                yield _data({**self._base("chat.completion.chunk"), "choices": [],
                             "usage": self._usage(outcome)})  # fmt: skip
            yield "data: [DONE]\n\n"
        finally:
            feed.close()


def _finish(out: RunOutput) -> str:
    return _FINISH.get(out.stop_reason, "stop")


def _data(payload: dict[str, Any]) -> str:
    return f"data: {json.dumps(payload, default=jsonable)}\n\n"


def _line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300]
