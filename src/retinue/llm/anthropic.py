"""``anthropic:<model>``: the Anthropic Messages API via the official SDK.

Honours ``ANTHROPIC_BASE_URL`` / ``ANTHROPIC_API_KEY``. As for OpenAI, the request body is
built directly (:mod:`retinue.llm._anthropic_wire`, prompt-cache breakpoints included) and sent
with the SDK's low-level ``client.post``, keeping its HTTP client, retries with backoff and its
stream class of raw events.

``Usage.input_tokens`` is the whole prompt (uncached + cache reads + cache writes), the figure
the run loop compares with the context window; ``cache_read_tokens`` is the cached part.

Thinking blocks, streamed or not, come back as reasoning parts of the model that answered
(:mod:`retinue.llm._anthropic_wire` says when they are sent back). A refusal arrives as HTTP
200 with ``stop_reason: "refusal"`` ("A declined request returns stop_reason: "refusal" with
a stop_details.category", https://platform.claude.com/docs/en/models/fable-5-1/migration-guide,
and the docs' "Refusals and fallback" page); it is raised as
:class:`~retinue.errors.ModelRefusal`, never passed on as an empty answer.
"""

from __future__ import annotations

import logging
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
    RedactedThinkingBlock,
    RefusalStopDetails,
    SignatureDelta,
    TextDelta,
    ThinkingBlock,
    ThinkingDelta,
    ToolUseBlock,
)
from anthropic.types import Message as WireMessage

from retinue.errors import ModelError, ModelRefusal
from retinue.llm._anthropic_wire import (
    build_request,
    dropped_settings,
    is_signed,
    reasoning_part,
    reply_from_anthropic,
    thinking_config,
)
from retinue.llm._clients import PerLoopClients, api_key_for
from retinue.llm._errors import ProviderInfo, connection_error, status_error
from retinue.llm._openai_wire import ToolCallAssembler
from retinue.llm.base import ModelResponse, TextCallback, ToolSpec
from retinue.llm.guard import check_request_allowed
from retinue.llm.settings import ModelSettings
from retinue.messages import AssistantMessage, Message, ReasoningPart, Usage

__all__ = ["DEFAULT_BASE_URL", "AnthropicModel"]

DEFAULT_BASE_URL = "https://api.anthropic.com"
KEY_VAR, URL_VAR = "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"
_FINISH = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}
log = logging.getLogger("retinue.llm")


class AnthropicModel:
    """A Claude model; ``name`` is ``"anthropic:<model>"``.

    ``base_url`` / ``api_key`` default to ``ANTHROPIC_BASE_URL`` / ``ANTHROPIC_API_KEY``.
    Without a key, the official endpoint is a :class:`ConfigError`; a proxy gets a placeholder.
    ``max_tokens`` defaults to 16,000 for models that think, 4,096 for the others.
    ``settings`` (:class:`~retinue.llm.settings.ModelSettings`) override ``max_retries``,
    ``timeout`` and ``max_tokens`` where they set them, and shape each request body.
    """

    def __init__(
        self,
        name: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        max_retries: int = 3,
        timeout: float = 120.0,
        max_tokens: int | None = None,
        settings: ModelSettings | None = None,
    ) -> None:
        self._model = name
        self.base_url = (base_url or os.environ.get(URL_VAR) or DEFAULT_BASE_URL).rstrip("/")
        key = api_key or os.environ.get(KEY_VAR)
        key = api_key_for(key, self.base_url, "api.anthropic.com", KEY_VAR)
        self._key = key
        self._variants: dict[str, AnthropicModel] = {}
        self.settings = settings or ModelSettings()
        if self.settings.max_retries is not None:
            max_retries = self.settings.max_retries
        timeout = self.settings.timeout or timeout
        self.max_retries = max_retries
        self.timeout = timeout
        # thinking counts against max_tokens: a thinking model gets room for both (the docs'
        # adaptive-thinking examples use 16000)
        self.max_tokens = max_tokens or (16_000 if thinking_config(name) else 4096)
        for dropped in dropped_settings(name, self.settings):
            log.warning("anthropic:%s: setting %s left out", name, dropped)
        self._info = ProviderInfo("anthropic", KEY_VAR, URL_VAR, self.base_url, max_retries)
        self._clients = PerLoopClients(
            lambda: AsyncAnthropic(
                api_key=key, base_url=self.base_url, max_retries=max_retries, timeout=timeout
            )
        )

    @property
    def name(self) -> str:
        return f"anthropic:{self._model}"

    def with_settings(self, settings: ModelSettings) -> AnthropicModel:
        """This model asked with ``settings`` merged over its own; one instance (and one
        HTTP client) per distinct result, however often a session asks for it."""
        merged = self.settings.merged(settings)
        key = repr(merged)
        variant = self._variants.get(key)
        if variant is None:
            variant = self._variants[key] = AnthropicModel(
                self._model,
                base_url=self.base_url,
                api_key=self._key,
                max_retries=self.max_retries,
                timeout=self.timeout,
                max_tokens=self.max_tokens,
                settings=merged,
            )
        return variant

    async def aclose(self) -> None:
        """Close this event loop's HTTP connections (optional; for tidy shutdowns)."""
        await self._clients.aclose()
        for variant in self._variants.values():
            await variant.aclose()

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
            self._model,
            messages,
            tools,
            max_tokens=self.max_tokens,
            stream=stream,
            settings=self.settings,
        )
        client = self._clients.get()
        try:
            if on_text is None:
                reply = await client.post("/v1/messages", body=body, cast_to=WireMessage)
                return _from_message(reply, self._model)
            events = await client.post(
                "/v1/messages",
                body=body,
                cast_to=WireMessage,
                stream=True,
                stream_cls=AsyncStream[RawMessageStreamEvent],
            )
            return await _from_stream(events, on_text, self._model)
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


def refused(model: str, details: RefusalStopDetails | None) -> ModelRefusal:
    """The one-line error for a ``stop_reason: "refusal"`` answer."""
    why = ""
    if details is not None and details.category:
        why = f" (category: {details.category})"
    return ModelRefusal(f"anthropic:{model} declined to answer this request{why}")


def _from_message(reply: WireMessage, requested: str) -> ModelResponse:
    model = reply.model or requested
    if reply.stop_reason == "refusal":
        raise refused(model, reply.stop_details)
    message = reply_from_anthropic(reply.content, model)
    u = reply.usage
    usage = _usage(
        u.input_tokens, u.output_tokens, u.cache_read_input_tokens, u.cache_creation_input_tokens
    )
    finish = _FINISH.get(reply.stop_reason or "", reply.stop_reason or "stop")
    return ModelResponse(message, usage, finish)


class _Thinking:
    """Thinking blocks assembled from a stream: ``thinking_delta`` and ``signature_delta``
    events add to the block their index names ("Streaming thinking", extended thinking)."""

    def __init__(self) -> None:
        self.blocks: dict[int, dict[str, str]] = {}

    def start(self, index: int, block: ThinkingBlock | RedactedThinkingBlock) -> None:
        self.blocks[index] = {k: v for k, v in block.model_dump(mode="json").items() if v}

    def add(self, index: int, key: str, piece: str) -> None:
        block = self.blocks.setdefault(index, {"type": "thinking"})
        block[key] = block.get(key, "") + piece

    def parts(self, model: str) -> tuple[ReasoningPart, ...]:
        out = []
        for _, block in sorted(self.blocks.items()):
            if block.get("type") == "thinking":
                block = {"thinking": "", "signature": "", **block}
            part = reasoning_part(block, model)
            if is_signed(part):
                out.append(part)
        return tuple(out)


async def _from_stream(
    events: AsyncStream[RawMessageStreamEvent], on_text: TextCallback, requested: str
) -> ModelResponse:
    texts: list[str] = []
    calls = ToolCallAssembler()
    thinking = _Thinking()
    tokens = [0, 0, 0, 0]  # input, output, cache read, cache write
    stop_reason = "end_turn"
    model = requested
    details: RefusalStopDetails | None = None
    async for event in events:
        if isinstance(event, RawContentBlockDeltaEvent):
            delta = event.delta
            if isinstance(delta, TextDelta):
                texts.append(delta.text)
                on_text(delta.text)
            elif isinstance(delta, InputJSONDelta):
                calls.add(event.index, None, None, delta.partial_json)
            elif isinstance(delta, ThinkingDelta):
                thinking.add(event.index, "thinking", delta.thinking)
            elif isinstance(delta, SignatureDelta):
                thinking.add(event.index, "signature", delta.signature)
        elif isinstance(event, RawContentBlockStartEvent):
            block = event.content_block
            if isinstance(block, ToolUseBlock):
                calls.add(event.index, block.id, block.name, None)
            elif isinstance(block, ThinkingBlock | RedactedThinkingBlock):
                thinking.start(event.index, block)
        elif isinstance(event, RawMessageStartEvent):
            model = event.message.model or model
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
            details = event.delta.stop_details or details
    if stop_reason == "refusal":
        raise refused(model, details)
    usage = _usage(*tokens)
    finish = _FINISH.get(stop_reason, stop_reason)
    message = AssistantMessage("".join(texts), calls.calls(), thinking.parts(model))
    return ModelResponse(message, usage, finish)
