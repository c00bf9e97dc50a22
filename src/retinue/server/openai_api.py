"""The OpenAI-compatible endpoint: Retinue as a "model" any Chat Completions client can use.

::

    GET  /v1/models              "retinue", and "retinue/<role>" for every known role
    GET  /v1/models/{model}      one of them
    POST /v1/chat/completions    one turn; "stream": true answers with SSE chunks

Both need the service's bearer token, which is what ``OpenAI(api_key=token, base_url=
"http://127.0.0.1:8765/v1")`` sends. Errors from these routes are one-line JSON in OpenAI's
shape, ``{"error": {"message": "...", "type": "...", "code": <status>}}``, with the service's
status codes (404 for an unknown model), so the SDK raises its usual exceptions with the
message; the front door's refusals (401 without the token, 413 for a huge body) keep the
service's ``{"error": "..."}``. A failure after a stream began is a last chunk
``data: {"error": {...}}`` of the same shape, which the SDK raises as an ``APIError``.

**Which conversation.** The client's message list is the conversation; its last message
must be the user's, and it is the new turn.

* With a header ``X-Retinue-Conversation: <id>``, the turn goes to that conversation (the
  same as ``POST /v1/conversations/<id>/messages``), whose stored history is authoritative:
  the earlier messages of the list are not read again.
* Without it, the conversation is found by the list's earlier messages: a digest of the
  model and each earlier message's role and text (tool messages aside). After each turn the
  service remembers that the digest of the list plus the reply it sent leads to the same
  conversation, so a client that resends its whole history each time continues one Retinue
  conversation (tool calls and results included). A first message starts a new
  conversation ``oai-<random>``; a list whose earlier part nobody has seen starts
  ``oai-<digest>``. These links live in this process: after a restart, or on another
  worker, a continued list starts a new conversation. Send the header to keep a chat's full
  history across restarts.
* A new conversation whose list holds earlier messages (system messages, a chat begun
  elsewhere, or one continued after a restart) gets them as a transcript before the new
  message, system messages as the client's instructions, so nothing the user saw is lost.

Every response carries the conversation in a header ``X-Retinue-Conversation``.

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
import hashlib
import itertools
import json
import secrets
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any, Literal

from fastapi import APIRouter, Header, Response
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException

from retinue.engine.config import RunOutput
from retinue.events import TEXT_DELTA, TOOL_STARTED, EventSink
from retinue.runtime import Runtime
from retinue.server.conversations import (
    ConversationHost,
    ServerBusy,
    agent_id_for,
    valid_conversation_id,
)
from retinue.server.sse import ErrorMapper, TurnFeed, jsonable

__all__ = ["ChatRequest", "is_openai_path", "openai_error", "openai_router"]

MODEL = "retinue"
HEADER = "X-Retinue-Conversation"
MAX_LINKS = 10_000  # prefix digests remembered (the oldest forgotten first)
_FINISH = {"max_iterations": "length"}
_PATHS = frozenset({"/v1/models", "/v1/chat/completions"})
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    409: "conflict_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}


def is_openai_path(path: str) -> bool:
    """Whether ``path`` is one of the OpenAI-compatible routes (their errors differ)."""
    return path in _PATHS


def openai_error(status: int, message: str) -> dict[str, Any]:
    """An error in OpenAI's shape."""
    kind = _ERROR_TYPES.get(status, "api_error" if status >= 500 else "retinue_error")
    return {"error": {"message": message, "type": kind, "code": status}}


_role_runs = itertools.count(1)


class ContentPart(BaseModel):
    """One part of a message's content; only ``text`` parts are read."""

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
            return "\n".join(p.text for p in self.content if p.type == "text" and p.text)
        return self.content or ""


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: bool = False


class ChatRequest(BaseModel):
    """The body of ``POST /v1/chat/completions``. Sampling settings are accepted and unused,
    and so are the client's ``tools``: the agents use their own."""

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


class _Links:
    """Prefix digest -> conversation id, the most recently used kept (see module doc)."""

    def __init__(self, limit: int = MAX_LINKS) -> None:
        self.limit = limit
        self._ids: OrderedDict[str, str] = OrderedDict()

    def get(self, digest: str) -> str | None:
        cid = self._ids.get(digest)
        if cid is not None:
            self._ids.move_to_end(digest)
        return cid

    def put(self, digest: str, cid: str) -> None:
        self._ids[digest] = cid
        self._ids.move_to_end(digest)
        while len(self._ids) > self.limit:
            self._ids.popitem(last=False)


def digest(model: str, messages: list[ChatMessage]) -> str:
    """What identifies a list's conversation: the model and every message's role and text
    (tool messages left out, text stripped)."""
    said = [(m.role, m.text.strip()) for m in messages if m.role not in ("tool", "function")]
    raw = json.dumps([model, said], ensure_ascii=False)
    return hashlib.sha256(raw.encode()).hexdigest()


def transcript(messages: list[ChatMessage], last: str) -> str:
    """The client's earlier messages and the new one, as one task text."""
    lines = ["[Earlier in this conversation, as the client sent it:]"]
    for m in messages:
        who = "instructions" if m.role in ("system", "developer") else m.role
        lines.append(f"[{who}] {m.text}")
    lines += ["", "[The new message:]", last]
    return "\n".join(lines)


def _ignore(_reply: str) -> None:
    pass


@dataclass(slots=True)
class _Turn:
    """One request's turn: how to start it, whose text deltas are the answer's, and what to
    do with the reply the client got."""

    conversation: str | None
    speaker: Callable[[str], bool]
    start: Callable[[EventSink | None], asyncio.Task[RunOutput]]
    answered: Callable[[str], None] = _ignore


def openai_router(host: ConversationHost, runtime: Runtime, errors: ErrorMapper) -> APIRouter:
    """The routes of the OpenAI-compatible endpoint (see the module docstring)."""
    router = APIRouter()
    links = _Links()
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

    def conversation_for(body: ChatRequest, header: str | None) -> str:
        if header is not None:
            if not valid_conversation_id(header):
                raise HTTPException(
                    400, f"bad {HEADER} header {header!r}: use 1-64 letters, digits, '_', '.', '-'"
                )
            return header
        earlier = body.messages[:-1]
        if not any(m.role in ("user", "assistant") for m in earlier):
            return f"oai-{secrets.token_hex(16)}"  # a new chat
        key = digest(body.model, earlier)
        return links.get(key) or f"oai-{key[:32]}"

    async def main_turn(body: ChatRequest, header: str | None) -> _Turn:
        cid = conversation_for(body, header)
        *earlier, last = body.messages
        text = last.text
        if earlier and await host.history(cid) is None:
            text = transcript(earlier, text)  # instructions, or a chat begun elsewhere
        root = agent_id_for(cid)

        def answered(reply: str) -> None:
            if header is None:
                links.put(digest(body.model, [*body.messages, _reply(reply)]), cid)

        def start(sink: EventSink | None) -> asyncio.Task[RunOutput]:
            return host.start(cid, text, on_event=sink)

        return _Turn(cid, lambda agent: agent == root, start, answered)

    def role_turn(body: ChatRequest, role: str) -> _Turn:
        if len(running) >= host.limits.max_turns:
            raise ServerBusy(f"{host.limits.max_turns} role runs are in progress; retry later")
        *earlier, last = body.messages
        task_text = transcript(earlier, last.text) if earlier else last.text
        root = f"oai-{role}-{next(_role_runs)}"

        async def delegate(sink: EventSink | None) -> RunOutput:
            with ExitStack() as watching:
                if sink is not None:
                    watching.enter_context(host.hub.subscribe(root, sink))
                try:
                    return await runtime.manager.run_subagent(
                        runtime.context(root), task_text, role
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

    async def turn_for(body: ChatRequest, header: str | None) -> _Turn:
        if body.messages[-1].role != "user":
            raise HTTPException(400, "the last message must be the user's: it is the new turn")
        if not body.messages[-1].text.strip():
            raise HTTPException(400, "the last user message is empty: say what to do")
        if body.model == MODEL:
            return await main_turn(body, header)
        role = body.model.removeprefix(f"{MODEL}/")
        if body.model.startswith(f"{MODEL}/") and role in runtime.catalog.roles:
            return role_turn(body, role)
        raise unknown(body.model)

    @router.post("/v1/chat/completions", response_model=None)
    async def chat_completions(
        body: ChatRequest,
        response: Response,
        x_retinue_conversation: str | None = Header(default=None, max_length=200),
    ) -> dict[str, Any] | StreamingResponse:
        turn = await turn_for(body, x_retinue_conversation)
        headers = {HEADER: turn.conversation} if turn.conversation else {}
        chat = _Completion(body.model, turn.conversation)
        if body.stream:
            usage = body.stream_options is not None and body.stream_options.include_usage
            return StreamingResponse(
                chat.stream(turn, errors, usage),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", **headers},
            )
        out = await turn.start(None)
        turn.answered(out.content)
        response.headers.update(headers)
        return chat.completion(out)

    return router


def _model(name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": 0, "owned_by": "retinue"}


def _reply(text: str) -> ChatMessage:
    return ChatMessage(role="assistant", content=text)


class _Completion:
    """The JSON of one completion, whole or as chunks."""

    def __init__(self, model: str, conversation: str | None) -> None:
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
                yield self.chunk({}, extra={"event": event.to_dict()})
            outcome = feed.outcome(errors)
            if not isinstance(outcome, RunOutput):
                yield _data(openai_error(*outcome))
                return
            spoken = "".join(said)
            if not spoken.endswith(outcome.content):  # not streamed (or not all of it)
                rest = ("\n\n" if spoken else "") + outcome.content
                spoken += rest
                yield self.chunk({"content": rest})
            turn.answered(spoken)
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
