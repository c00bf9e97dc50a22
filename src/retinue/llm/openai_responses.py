"""``openai:<model>`` on OpenAI's own API, through the Responses API of the official SDK.

OpenAI's reasoning models refuse function tools on Chat Completions while they reason
("Function tools with reasoning_effort are not supported for <model> in /v1/chat/completions.
To use function tools, use /v1/responses or set reasoning_effort to 'none'."; reasoning is on
by default for them), so on api.openai.com Retinue speaks ``/v1/responses``
(the endpoint of ``client.responses.create``): flat function tools,
``reasoning={"effort": ...}`` when set, and stateless requests that work under zero data
retention -- ``store=false`` with
``include=["reasoning.encrypted_content"]`` (the Responses API reference, ``include``:
"enables reasoning items to be used in multi-turn conversations when using the Responses API
statelessly (like when the store parameter is set to false ...)"). Each reasoning item comes
back whole in the reply's :class:`~retinue.messages.ReasoningPart` and is replayed verbatim
before the calls it preceded (:mod:`retinue.llm._responses_wire`).

Which API an ``openai:`` model uses (:func:`openai_api`): the setting ``api`` for the provider
(``RETINUE_OPENAI_API`` or ``[providers.openai] api`` in config.toml: ``"responses"`` or
``"chat"``) wins; otherwise Responses for api.openai.com and Chat Completions
(:class:`~retinue.llm.openai.OpenAIModel`) for any other base URL (Ollama, vLLM, llama.cpp,
DeepSeek, LiteLLM, Azure, the local model). A server that answers 404/405 to ``/responses``
gets a one-line error naming the setting.

The body is encoded here and posted to ``/responses`` with the SDK's own client (its HTTP
connection, retries with backoff, error classes and Responses event stream), as
``client.responses.create`` does, less its parameter transformation, which walks every input
item against the SDK's types: half a second per request for a 400-item history (measured),
where encoding the same body takes under a millisecond. A plain answer's JSON is read here
(building the SDK's typed Response costs more than the rest of the request); a streamed one
comes through the SDK's event stream, its text deltas reaching ``on_text`` as they arrive.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from retinue.config import provider_api
from retinue.errors import ConfigError, ModelError
from retinue.llm._clients import PerLoopClients, api_key_for
from retinue.llm._errors import ProviderInfo, connection_error, error_detail, status_error
from retinue.llm._responses_wire import request_input, response_from_json, tools_to_responses
from retinue.llm._structured import native_output
from retinue.llm.base import Model, ModelResponse, TextCallback, ToolSpec
from retinue.llm.guard import check_request_allowed, is_loopback_url
from retinue.llm.profiles import EFFORT, profile_for
from retinue.messages import Message

if TYPE_CHECKING:
    from openai import AsyncOpenAI

    from retinue.llm.settings import ModelSettings

__all__ = [
    "APIS",
    "API_VAR",
    "INCLUDE",
    "OpenAIResponsesModel",
    "build_params",
    "openai_api",
    "openai_model",
    "settings_fields",
]

log = logging.getLogger("retinue.llm")

DEFAULT_BASE_URL = "https://api.openai.com/v1"
KEY_VAR, URL_VAR, API_VAR = "OPENAI_API_KEY", "OPENAI_BASE_URL", "RETINUE_OPENAI_API"
APIS = ("responses", "chat")
INCLUDE = ["reasoning.encrypted_content"]
API_HINT = f'set {API_VAR}=chat (or api = "chat" under [providers.openai] in config.toml)'


def openai_api(base_url: str, setting: str | None = None) -> str:
    """``"responses"`` or ``"chat"``: ``setting`` when given, else Responses for OpenAI's own
    API and Chat Completions for any other server (the OpenAI-compatible ones)."""
    if setting is not None:
        if setting not in APIS:
            raise ConfigError(f"the openai api must be one of {', '.join(APIS)}, not {setting!r}")
        return setting
    return "responses" if urlsplit(base_url).hostname == "api.openai.com" else "chat"


def openai_model(name: str) -> Model:
    """The model for ``openai:<name>``, on the API that :func:`openai_api` chooses for
    ``OPENAI_BASE_URL`` and the ``api`` setting."""
    base_url = os.environ.get(URL_VAR) or DEFAULT_BASE_URL
    if openai_api(base_url, provider_api("openai")) == "responses":
        return OpenAIResponsesModel(name)
    from retinue.llm.openai import OpenAIModel

    return OpenAIModel(name)


def build_params(
    model: str,
    messages: Sequence[Message],
    tools: Sequence[ToolSpec],
    *,
    reasoning_effort: str | None = None,
    settings: ModelSettings | None = None,
    stream: bool = False,
) -> dict[str, Any]:
    """The keyword arguments of one ``responses.create`` call (a plain function, no I/O).
    ``reasoning_effort`` (any value OpenAI takes) applies when ``settings`` set no effort."""
    instructions, items = request_input(messages, model)
    params: dict[str, Any] = {"model": model, "input": items, "store": False, "include": INCLUDE}
    if instructions is not None:
        params["instructions"] = instructions
    tools, text_format = native_output(tools)  # a run's output type, as text.format
    if tools:
        params["tools"] = tools_to_responses(tools)
    if reasoning_effort is not None:
        params["reasoning"] = {"effort": reasoning_effort}
    if settings is not None:
        params.update(settings_fields(model, settings)[0])
    if text_format is not None:  # (beside what an ``extra`` text field says: verbosity...)
        params["text"] = {**params.get("text", {}), "format": text_format}
    if stream:
        params["stream"] = True
    return params


_OWN_FIELDS = frozenset({"model", "input", "instructions", "tools", "store", "include", "stream"})


def settings_fields(model: str, settings: ModelSettings) -> tuple[dict[str, Any], list[str]]:
    """The request fields ``settings`` set for ``model``, and those left out with the reason.

    ``effort`` goes as ``reasoning.effort`` to a reasoning model (``max``, which OpenAI does
    not have, as its highest, ``xhigh``); ``temperature`` and ``top_p`` only to a model that
    does not reason ("Unsupported value: 'temperature' does not support 0.2 with this model.
    Only the default (1) value is supported.", community.openai.com/t/1337957);
    ``max_output_tokens`` as it is; ``cache_ttl`` is Anthropic's (OpenAI caches prompts
    without breakpoints); ``extra`` fields are added, except those Retinue sets itself.
    """
    reasons = profile_for(f"openai:{model}").thinking == EFFORT  # the model catalogue's
    fields: dict[str, Any] = {}
    dropped: list[str] = []
    if settings.effort and reasons:
        fields["reasoning"] = {"effort": "xhigh" if settings.effort == "max" else settings.effort}
    elif settings.effort:
        dropped.append("effort (the model does not reason)")
    if settings.max_output_tokens is not None:
        fields["max_output_tokens"] = settings.max_output_tokens
    for name, value in (("temperature", settings.temperature), ("top_p", settings.top_p)):
        if value is not None and reasons:
            dropped.append(f"{name} (a reasoning model takes only its default)")
        elif value is not None:
            fields[name] = value
    if settings.cache_ttl:
        dropped.append("cache_ttl (OpenAI caches prompts without breakpoints)")
    for key, value in settings.extra.items():
        if key in _OWN_FIELDS:
            dropped.append(f"extra.{key} (set by Retinue)")
        else:
            fields[key] = value
    return fields, dropped


class OpenAIResponsesModel:
    """An OpenAI model over the Responses API; ``name`` is ``"openai:<model>"``.

    ``base_url`` / ``api_key`` default to ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` (the key is
    required for api.openai.com); ``reasoning_effort`` (``"none"``, ``"low"``, ``"medium"``,
    ``"high"``...) is sent as ``reasoning.effort`` when set, the model's default otherwise;
    ``settings`` (:class:`~retinue.llm.settings.ModelSettings`) as :func:`settings_fields`
    maps them, its ``timeout`` and ``max_retries`` for the client.
    """

    def __init__(
        self,
        name: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        max_retries: int = 3,
        timeout: float = 120.0,
        reasoning_effort: str | None = None,
        settings: ModelSettings | None = None,
    ) -> None:
        self._model = name
        self.base_url = (base_url or os.environ.get(URL_VAR) or DEFAULT_BASE_URL).rstrip("/")
        hint = f"{KEY_VAR} (or {URL_VAR} to use a local OpenAI-compatible server)"
        self._key = key = api_key_for(
            api_key or os.environ.get(KEY_VAR), self.base_url, "api.openai.com", hint
        )
        if settings is not None:
            max_retries = max_retries if settings.max_retries is None else settings.max_retries
            timeout = settings.timeout or timeout
            for dropped in settings_fields(name, settings)[1]:
                log.warning("openai:%s: setting %s left out", name, dropped)
        self.max_retries = max_retries
        self.timeout = timeout
        self.reasoning_effort = reasoning_effort
        self.settings = settings
        self._loopback = is_loopback_url(self.base_url)
        self._info = ProviderInfo("openai", KEY_VAR, URL_VAR, self.base_url, max_retries)
        self._clients: PerLoopClients[AsyncOpenAI] = PerLoopClients(lambda: self._client(key))

    @property
    def name(self) -> str:
        return f"openai:{self._model}"

    def with_settings(self, settings: ModelSettings) -> OpenAIResponsesModel:
        """This model asked with ``settings`` merged over its own (a new client)."""
        merged = settings if self.settings is None else self.settings.merged(settings)
        return OpenAIResponsesModel(
            self._model,
            base_url=self.base_url,
            api_key=self._key,
            max_retries=self.max_retries,
            timeout=self.timeout,
            reasoning_effort=self.reasoning_effort,
            settings=merged,
        )

    def _client(self, key: str) -> AsyncOpenAI:
        from openai import AsyncOpenAI

        return AsyncOpenAI(
            api_key=key, base_url=self.base_url, max_retries=self.max_retries, timeout=self.timeout
        )

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
        import openai

        if not self._loopback:
            check_request_allowed(self.base_url)
        params = build_params(
            self._model,
            messages,
            tools,
            reasoning_effort=self.reasoning_effort,
            settings=self.settings,
            stream=on_text is not None,
        )
        try:
            if on_text is None:
                return await self._plain(params)
            return await self._streamed(params, on_text)
        except openai.APIStatusError as exc:
            raise self._status_error(exc.status_code, exc.body, exc.message) from None
        except openai.APIConnectionError as exc:
            timed_out = isinstance(exc, openai.APITimeoutError)
            raise connection_error(self._info, exc, timed_out=timed_out) from None
        except openai.OpenAIError as exc:
            raise ModelError(f"openai ({self.base_url}): {_line(exc)}") from None

    async def _plain(self, params: dict[str, Any]) -> ModelResponse:
        import httpx

        client = self._clients.get()
        raw = await client.post("/responses", content=_encode(params), cast_to=httpx.Response)
        try:
            data = json.loads(raw.content)
        except ValueError:
            raise ModelError("openai: the server's answer is not JSON") from None
        return response_from_json(data, self._model)

    async def _streamed(self, params: dict[str, Any], on_text: TextCallback) -> ModelResponse:
        from openai import AsyncStream

        # each event kept as its JSON: building the SDK's typed events (a union of some fifty
        # classes) costs several times the rest of a short turn
        stream = await self._clients.get().post(
            "/responses",
            content=_encode(params),
            cast_to=object,
            stream=True,
            stream_cls=AsyncStream[object],
        )
        final: Any = None
        async for event in stream:
            if not isinstance(event, dict):
                continue
            kind = event.get("type")
            if kind == "response.output_text.delta":
                on_text(str(event.get("delta") or ""))
            elif kind in _FINAL_EVENTS:
                final = event.get("response")
            elif kind == "error":
                detail = _line(event.get("message") or event)
                raise ModelError(f"openai ({self.base_url}): the stream failed: {detail}")
        if final is None:
            raise ModelError(f"openai ({self.base_url}): the stream ended before the response")
        return response_from_json(final, self._model)

    def _status_error(self, status: int, body: object, fallback: str) -> ModelError:
        """An HTTP error as a ModelError; a server without ``/responses`` names the setting."""
        if status in (404, 405) and urlsplit(self.base_url).hostname != "api.openai.com":
            message, _ = error_detail(body, fallback)
            return ModelError(
                f"openai ({self.base_url}) answered HTTP {status} to /responses ({message}): "
                f"if it has no Responses API, {API_HINT}; otherwise check the model name",
                status_code=status,
            )
        return status_error(self._info, status, body, fallback)


_FINAL_EVENTS = frozenset({"response.completed", "response.incomplete", "response.failed"})
_encode_json = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def _encode(params: dict[str, Any]) -> bytes:
    """The request body; a lone surrogate (a file name that is not UTF-8) becomes ``?``."""
    return _encode_json(params).encode("utf-8", "replace")


def _line(value: object) -> str:
    return " ".join(str(value).split())[:500]
