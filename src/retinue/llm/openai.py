"""``openai:<model>``: any OpenAI-compatible Chat Completions endpoint via the official SDK.

Works with OpenAI, DeepSeek, Ollama, vLLM, llama.cpp server... by setting ``OPENAI_BASE_URL``.
OpenAI's own API is spoken through Responses instead (:mod:`retinue.llm.openai_responses`
says how the API is chosen); this adapter serves every other base URL, or ``api = "chat"``.
The request body is built directly from Retinue messages (:mod:`retinue.llm._openai_wire`) and
sent with the SDK's low-level ``client.post`` rather than ``chat.completions.create``, whose
parameter transformation grows with the history; the SDK's HTTP client, retries with backoff
(429 / 5xx / timeouts, ``max_retries``) and stream classes are kept. To a plain-HTTP server
(a local model), a non-streaming request goes first through the lean kept-alive POST of
:mod:`retinue.llm._http11`; anything but a complete ``200`` is sent again through the SDK.
The SDK is imported when first needed (it takes most of a second), so a run against a local
server that answers never pays for it.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from retinue.errors import ModelError
from retinue.llm._clients import PerLoopClients, api_key_for
from retinue.llm._errors import ProviderInfo, connection_error, status_error
from retinue.llm._http11 import Answer, FastPoster, Unanswered, fast_path_allowed
from retinue.llm._openai_wire import (
    ToolCallAssembler,
    WireEncoder,
    media_ready,
    messages_to_openai,
    reply_from_openai,
    tools_to_openai,
)
from retinue.llm.base import ModelResponse, TextCallback, ToolSpec
from retinue.llm.guard import check_request_allowed, is_loopback_url
from retinue.messages import AssistantMessage, Message, Usage

if TYPE_CHECKING:
    from openai import AsyncOpenAI, AsyncStream
    from openai.types.chat import ChatCompletionChunk

__all__ = ["DEFAULT_BASE_URL", "OpenAIModel", "build_request"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
KEY_VAR, URL_VAR = "OPENAI_API_KEY", "OPENAI_BASE_URL"


def build_request(
    model: str, messages: Sequence[Message], tools: Sequence[ToolSpec], *, stream: bool
) -> dict[str, Any]:
    """The JSON body of one Chat Completions request (a plain function, no I/O)."""
    body: dict[str, Any] = {"model": model, "messages": messages_to_openai(messages, model)}
    if tools:
        body["tools"] = tools_to_openai(tools)
    if stream:
        body.update(STREAM_OPTIONS)
    return body


STREAM_OPTIONS: dict[str, Any] = {"stream": True, "stream_options": {"include_usage": True}}


class OpenAIModel:
    """A Chat Completions model; ``name`` is ``"openai:<model>"``.

    ``base_url`` / ``api_key`` default to ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``. Without a
    key, the official endpoint is a :class:`ConfigError`; a custom server gets a placeholder.
    """

    def __init__(
        self,
        name: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        max_retries: int = 3,
        timeout: float = 120.0,
    ) -> None:
        self._model = name
        self.base_url = (base_url or os.environ.get(URL_VAR) or DEFAULT_BASE_URL).rstrip("/")
        hint = f"{KEY_VAR} (or {URL_VAR} to use a local OpenAI-compatible server)"
        key = api_key or os.environ.get(KEY_VAR)
        key = api_key_for(key, self.base_url, "api.openai.com", hint)
        self.max_retries = max_retries
        self.timeout = timeout
        self._loopback = is_loopback_url(self.base_url)  # always allowed (the guard's rule)
        self._info = ProviderInfo("openai", KEY_VAR, URL_VAR, self.base_url, max_retries)
        self._clients: PerLoopClients[AsyncOpenAI] = PerLoopClients(lambda: _sdk_client(self, key))
        headers = {
            "Authorization": f"Bearer {key}",
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": "retinue (OpenAI-compatible client)",
        }
        self._wire = WireEncoder()
        self._fast: PerLoopClients[FastPoster] | None = None
        if fast_path_allowed(self.base_url):
            self._fast = PerLoopClients(lambda: FastPoster(self.base_url, headers, timeout))

    @property
    def name(self) -> str:
        return f"openai:{self._model}"

    async def aclose(self) -> None:
        """Close this event loop's HTTP connections (optional; for tidy shutdowns)."""
        await self._clients.aclose()
        if self._fast is not None:
            await self._fast.aclose()

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        *,
        on_text: TextCallback | None = None,
    ) -> ModelResponse:
        if not self._loopback:
            check_request_allowed(self.base_url)
        messages = media_ready(messages, self._model)
        extra = STREAM_OPTIONS if on_text is not None else None
        retries = self.max_retries
        if on_text is None and self._fast is not None:
            # the first attempt, over the lean path (see retinue.llm._http11), whose request
            # is joined from the body's pieces at once (one copy of a long history)
            parts = self._wire.parts(self._model, messages, tools, extra)
            try:
                answer = await self._fast.get().post("/chat/completions", parts)
            except Unanswered as exc:
                answer = exc
            if type(answer) is Answer and answer.status == 200:
                return _from_completion(_json_body(answer.body))
            await self._after_first_attempt(answer)
            retries -= 1  # that attempt was the first
        body = self._wire.body(self._model, messages, tools, extra)  # sent as-is
        return await self._sdk_complete(body, on_text, retries)

    async def _sdk_complete(
        self, body: bytes, on_text: TextCallback | None, retries: int
    ) -> ModelResponse:
        """The request through the SDK, with ``retries`` retries; errors in one line."""
        import httpx
        import openai
        from openai import AsyncStream
        from openai.types.chat import ChatCompletion, ChatCompletionChunk

        client = self._clients.get()
        if retries != self.max_retries:
            client = client.with_options(max_retries=retries)
        try:
            if on_text is None:
                # the raw response, parsed here: the SDK's model construction costs more
                # than the whole request otherwise does
                raw = await client.post("/chat/completions", content=body, cast_to=httpx.Response)
                return _from_completion(_json_body(raw.content))
            stream = await client.post(
                "/chat/completions",
                content=body,
                cast_to=ChatCompletion,
                stream=True,
                stream_cls=AsyncStream[ChatCompletionChunk],
            )
            return await _from_stream(stream, on_text)
        except openai.APIStatusError as exc:
            raise _status_error(self._info, exc.status_code, exc.body, exc.message) from None
        except openai.APIConnectionError as exc:
            timed_out = isinstance(exc, openai.APITimeoutError)
            raise connection_error(self._info, exc, timed_out=timed_out) from None
        except openai.OpenAIError as exc:
            raise ModelError(f"openai ({self.base_url}): {exc}") from None

    async def _after_first_attempt(self, answer: Answer | Unanswered) -> None:
        """A first attempt (over the lean path) that did not answer ``200``.

        A failure the SDK would retry returns after the SDK's delay (or the server's
        ``retry-after``), for the SDK to make the remaining ``max_retries - 1`` attempts;
        any other failure, or one with no retries left, is raised as the SDK path would
        raise it.
        """
        if isinstance(answer, Unanswered):
            if self.max_retries < 1:
                raise connection_error(self._info, answer, timed_out=answer.timed_out)
            await asyncio.sleep(RETRY_DELAY)
            return
        retry = answer.should_retry
        if retry is None:
            retry = answer.status in (408, 409, 429) or answer.status >= 500
        if not retry or self.max_retries < 1:
            error = _error_json(answer.body)
            fallback = f"Error code: {answer.status}"
            raise _status_error(self._info, answer.status, error, fallback)
        delay = answer.retry_after
        await asyncio.sleep(delay if delay is not None and 0 <= delay <= 60 else RETRY_DELAY)


def _status_error(info: ProviderInfo, status: int, body: object, fallback: str) -> ModelError:
    """:func:`status_error`, naming the API setting when the server asks for /v1/responses
    (OpenAI's reasoning models refuse function tools on Chat Completions)."""
    error = status_error(info, status, body, fallback)
    if status in (400, 404) and "/v1/responses" in str(error):
        hint = 'set RETINUE_OPENAI_API=responses (or api = "responses" under [providers.openai])'
        return ModelError(f"{error}; {hint}", status_code=status)
    return error


def _sdk_client(model: OpenAIModel, key: str) -> AsyncOpenAI:
    from openai import AsyncOpenAI

    return AsyncOpenAI(
        api_key=key, base_url=model.base_url, max_retries=model.max_retries, timeout=model.timeout
    )


RETRY_DELAY = 0.5  # seconds before the SDK's attempts, as its own first retry waits


def _error_json(content: bytes) -> object:
    try:
        return json.loads(content)
    except ValueError:
        return content.decode("utf-8", "replace")[:500]


_decode_json = json.JSONDecoder().raw_decode


def _json_body(content: bytes) -> dict[str, Any]:
    try:
        if content[:1] == b"{" and content[1:2] != b"\0":  # UTF-8, as json.loads would see
            # json.loads less its encoding detection and whitespace scans: the same result
            text = content.decode("utf-8", "surrogatepass")
            data, end = _decode_json(text)
            if end != len(text) and text[end:].strip(" \t\n\r"):
                raise ValueError("extra data after the JSON object")
        else:
            data = json.loads(content)
    except ValueError:
        raise ModelError("openai: the server's answer is not JSON") from None
    if not isinstance(data, dict):
        raise ModelError("openai: the server's answer is not a JSON object")
    return data


def _from_completion(data: dict[str, Any]) -> ModelResponse:
    """A Chat Completions answer (as parsed JSON) as a response; tolerant of sparse servers."""
    choices = data.get("choices") or []
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ModelError("openai: the server answered a chat completion without choices")
    choice = choices[0]
    reply = reply_from_openai(choice.get("message"))
    return ModelResponse(
        reply, _usage_json(data.get("usage")), choice.get("finish_reason") or "stop"
    )


def _usage_json(u: Any) -> Usage:
    if not isinstance(u, dict):
        return Usage(requests=1)
    details = u.get("prompt_tokens_details") or {}
    cached = details.get("cached_tokens") or 0 if isinstance(details, dict) else 0
    return Usage(u.get("prompt_tokens") or 0, u.get("completion_tokens") or 0, cached, 1)


async def _from_stream(
    stream: AsyncStream[ChatCompletionChunk], on_text: TextCallback
) -> ModelResponse:
    parts: list[str] = []
    calls = ToolCallAssembler()
    usage: dict[str, Any] | None = None
    finish = "stop"
    async for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage.model_dump()
        for choice in chunk.choices:
            delta = choice.delta
            if delta.content:
                parts.append(delta.content)
                on_text(delta.content)
            for tc in delta.tool_calls or ():
                fn = tc.function
                calls.add(tc.index, tc.id, fn and fn.name, fn and fn.arguments)
            if choice.finish_reason:
                finish = choice.finish_reason
    message = AssistantMessage("".join(parts), calls.calls())
    return ModelResponse(message, _usage_json(usage), finish)
