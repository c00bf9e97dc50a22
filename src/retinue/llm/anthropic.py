"""``anthropic:<model>``: the Anthropic Messages API via the official SDK.

Honours ``ANTHROPIC_BASE_URL`` / ``ANTHROPIC_API_KEY``. As for OpenAI, the request body is
built directly (:mod:`retinue.llm._anthropic_wire`, prompt-cache breakpoints included) and sent
with the SDK's low-level ``client.post``, keeping its HTTP client, retries with backoff and its
stream class of raw events.

``Usage.input_tokens`` is the whole prompt (uncached + cache reads + cache writes), the figure
the run loop compares with the context window; ``cache_read_tokens`` is the cached part.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import anthropic
from anthropic import AsyncAnthropic, AsyncStream
from anthropic.types import (
    InputJSONDelta,
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    RawMessageDeltaEvent,
    RawMessageStartEvent,
    RawMessageStreamEvent,
    TextDelta,
    ToolUseBlock,
)
from anthropic.types import Message as WireMessage

from retinue.errors import ModelError
from retinue.llm._anthropic_wire import build_request, reply_from_anthropic
from retinue.llm._clients import PerLoopClients, api_key_for
from retinue.llm._errors import ProviderInfo, connection_error, status_error
from retinue.llm._openai_wire import ToolCallAssembler
from retinue.llm.base import ModelResponse, TextCallback, ToolSpec
from retinue.llm.guard import check_request_allowed
from retinue.messages import AssistantMessage, Message, Usage

__all__ = ["DEFAULT_BASE_URL", "AnthropicModel"]

DEFAULT_BASE_URL = "https://api.anthropic.com"
KEY_VAR, URL_VAR = "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"
_FINISH = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}


class AnthropicModel:
    """A Claude model; ``name`` is ``"anthropic:<model>"``.

    ``base_url`` / ``api_key`` default to ``ANTHROPIC_BASE_URL`` / ``ANTHROPIC_API_KEY``.
    Without a key, the official endpoint is a :class:`ConfigError`; a proxy gets a placeholder.
    """

    def __init__(
        self,
        name: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        max_retries: int = 3,
        timeout: float = 120.0,
        max_tokens: int = 4096,
    ) -> None:
        self._model = name
        self.base_url = (base_url or os.environ.get(URL_VAR) or DEFAULT_BASE_URL).rstrip("/")
        key = api_key or os.environ.get(KEY_VAR)
        key = api_key_for(key, self.base_url, "api.anthropic.com", KEY_VAR)
        self.max_retries = max_retries
        self.timeout = timeout
        self.max_tokens = max_tokens
        self._info = ProviderInfo("anthropic", KEY_VAR, URL_VAR, self.base_url, max_retries)
        self._clients = PerLoopClients(
            lambda: AsyncAnthropic(
                api_key=key, base_url=self.base_url, max_retries=max_retries, timeout=timeout
            )
        )

    @property
    def name(self) -> str:
        return f"anthropic:{self._model}"

    async def aclose(self) -> None:
        """Close this event loop's HTTP connections (optional; for tidy shutdowns)."""
        await self._clients.aclose()

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        *,
        on_text: TextCallback | None = None,
    ) -> ModelResponse:
        check_request_allowed(self.base_url)
        stream = on_text is not None
        body = build_request(
            self._model, messages, tools, max_tokens=self.max_tokens, stream=stream
        )
        client = self._clients.get()
        try:
            if on_text is None:
                reply = await client.post("/v1/messages", body=body, cast_to=WireMessage)
                return _from_message(reply)
            events = await client.post(
                "/v1/messages",
                body=body,
                cast_to=WireMessage,
                stream=True,
                stream_cls=AsyncStream[RawMessageStreamEvent],
            )
            return await _from_stream(events, on_text)
        except anthropic.APIStatusError as exc:
            raise status_error(self._info, exc.status_code, exc.body, exc.message) from None
        except anthropic.APIConnectionError as exc:
            timed_out = isinstance(exc, anthropic.APITimeoutError)
            raise connection_error(self._info, exc, timed_out=timed_out) from None
        except anthropic.AnthropicError as exc:
            raise ModelError(f"anthropic ({self.base_url}): {exc}") from None


def _usage(
    input_tokens: int | None,
    output_tokens: int | None,
    cache_read: int | None,
    cache_write: int | None,
) -> Usage:
    read = cache_read or 0
    prompt = (input_tokens or 0) + read + (cache_write or 0)
    return Usage(prompt, output_tokens or 0, read, 1)


def _from_message(reply: WireMessage) -> ModelResponse:
    message = reply_from_anthropic(reply.content)
    u = reply.usage
    usage = _usage(
        u.input_tokens, u.output_tokens, u.cache_read_input_tokens, u.cache_creation_input_tokens
    )
    finish = _FINISH.get(reply.stop_reason or "", reply.stop_reason or "stop")
    return ModelResponse(message, usage, finish)


async def _from_stream(
    events: AsyncStream[RawMessageStreamEvent], on_text: TextCallback
) -> ModelResponse:
    texts: list[str] = []
    calls = ToolCallAssembler()
    tokens = [0, 0, 0, 0]  # input, output, cache read, cache write
    stop_reason = "end_turn"
    async for event in events:
        if isinstance(event, RawContentBlockDeltaEvent):
            delta = event.delta
            if isinstance(delta, TextDelta):
                texts.append(delta.text)
                on_text(delta.text)
            elif isinstance(delta, InputJSONDelta):
                calls.add(event.index, None, None, delta.partial_json)
        elif isinstance(event, RawContentBlockStartEvent):
            block = event.content_block
            if isinstance(block, ToolUseBlock):
                calls.add(event.index, block.id, block.name, None)
        elif isinstance(event, RawMessageStartEvent):
            u = event.message.usage
            tokens = [
                u.input_tokens,
                u.output_tokens,
                u.cache_read_input_tokens or 0,
                u.cache_creation_input_tokens or 0,
            ]
        elif isinstance(event, RawMessageDeltaEvent):
            d = event.usage
            tokens[1] = d.output_tokens
            tokens[0] = d.input_tokens if d.input_tokens is not None else tokens[0]
            tokens[2] = d.cache_read_input_tokens or tokens[2]
            tokens[3] = d.cache_creation_input_tokens or tokens[3]
            stop_reason = event.delta.stop_reason or stop_reason
    usage = _usage(*tokens)
    finish = _FINISH.get(stop_reason, stop_reason)
    return ModelResponse(AssistantMessage("".join(texts), calls.calls()), usage, finish)
