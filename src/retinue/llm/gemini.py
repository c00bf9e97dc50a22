"""``gemini:<model>``: Google's Gemini API (or Vertex AI) through the official ``google-genai``
SDK, ``client.aio.models.generate_content`` and ``generate_content_stream``.

Configuration, as the SDK reads it: the key from ``GOOGLE_API_KEY`` or ``GEMINI_API_KEY`` (the
SDK prefers ``GOOGLE_API_KEY`` when both are set); ``GOOGLE_GEMINI_BASE_URL`` for another
endpoint (the loopback emulator). Vertex AI when ``GOOGLE_GENAI_USE_VERTEXAI=true``, with
``GOOGLE_CLOUD_PROJECT`` and ``GOOGLE_CLOUD_LOCATION`` and Application Default Credentials (or
an express-mode key in ``GOOGLE_API_KEY``): the SDK reads these itself; ``GOOGLE_VERTEX_BASE_URL``
overrides its endpoint.

Function calling goes as function declarations, automatic function calling off; thought
signatures are kept and sent back on the part that carried them, to the model that made them
(:mod:`retinue.llm._gemini_wire`). A request keeps the previous one as its prefix (the system
instruction and tools first, history unchanged, signatures in place), which is what Gemini's
implicit context caching rewards; cached tokens come back as ``Usage.cache_read_tokens``.

The SDK turns the contents into its typed parts and back to JSON on every request: about
0.1 s of CPU for a 400-message history (measured on the loopback emulator), where writing the
same contents takes a few milliseconds; the official calls are used all the same, so that the
SDK's auth, Vertex AI routing and retries apply.

Settings (:func:`settings_config`): ``effort`` as ``thinking_config.thinking_level`` on Gemini 3
and later ("low" / "medium" / "high"; "minimal" is Flash's own and set through ``extra``) and
as ``thinking_budget`` on 2.5; ``max_output_tokens``, ``temperature``, ``top_p`` as they are;
``timeout`` and ``max_retries`` for the client (429, 408 and 5xx retried with backoff);
``extra`` fields join the ``GenerateContentConfig``. A blocked prompt (``promptFeedback.
blockReason``) or a safety stop (``finishReason: SAFETY``, ``PROHIBITED_CONTENT`` ...) is a
:class:`~retinue.errors.ModelRefusal`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from retinue.errors import ConfigError, ContextTooLongError, ModelError
from retinue.llm._clients import PLACEHOLDER_KEY, PerLoopClients
from retinue.llm._errors import ProviderInfo, connection_error, error_detail, status_error
from retinue.llm._gemini_wire import (
    check_blocked,
    first_candidate,
    request_contents,
    response_from_json,
    response_from_parts,
    tools_to_gemini,
)
from retinue.llm.base import ModelResponse, TextCallback, ToolSpec
from retinue.llm.guard import check_request_allowed
from retinue.llm.profiles import BUDGET, LEVEL, profile_for
from retinue.messages import Message

if TYPE_CHECKING:
    from retinue.llm.settings import ModelSettings

__all__ = ["DEFAULT_BASE_URL", "GeminiModel", "build_config", "settings_config"]

log = logging.getLogger("retinue.llm")

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
KEY_VAR = "GEMINI_API_KEY"  # what doctor and the messages name
KEY_VARS = ("GOOGLE_API_KEY", KEY_VAR)  # the SDK's order
URL_VAR, VERTEX_VAR = "GOOGLE_GEMINI_BASE_URL", "GOOGLE_GENAI_USE_VERTEXAI"
RETRIED = [408, 429, 500, 502, 503, 504]

_LEVELS = {"low": "low", "medium": "medium", "high": "high", "xhigh": "high", "max": "high"}
# Gemini 2.5 budgets (tokens); 2.5 Flash takes up to 24,576, 2.5 Pro up to 32,768
_BUDGETS = {"low": 1024, "medium": 8192, "high": 16384, "xhigh": 24576, "max": 24576}
_OWN_FIELDS = frozenset({"system_instruction", "tools", "automatic_function_calling"})


def settings_config(model: str, settings: ModelSettings) -> tuple[dict[str, Any], list[str]]:
    """The ``GenerateContentConfig`` fields ``settings`` set for ``model``, and those left
    out with the reason.

    ``effort``: Gemini 3 takes ``thinking_level`` and 2.5 ``thinking_budget``, never both in
    one request ("Doing so will return a 400 error", ai.google.dev/gemini-api/docs/gemini-3).
    Gemini 3 Pro takes the levels ``low`` and ``high``, Flash also ``minimal`` and ``medium``
    (same page): Retinue's ``medium`` goes to a Pro model as ``high`` (its default), and
    ``xhigh`` / ``max`` as ``high`` everywhere. A model that is not Gemini 2.5 or later gets no
    thinking setting.
    """
    fields: dict[str, Any] = {}
    dropped: list[str] = []
    bare = model.rsplit("/", 1)[-1]
    thinking = profile_for(f"gemini:{bare}").thinking  # LEVEL: Gemini 3; BUDGET: 2.5
    if settings.effort and thinking == LEVEL:
        level = _LEVELS[settings.effort]
        if level == "medium" and "flash" not in bare:
            level = "high"
            dropped.append("effort medium (Gemini 3 Pro thinks low or high: high is sent)")
        fields["thinking_config"] = {"thinking_level": level}
    elif settings.effort and thinking == BUDGET:
        fields["thinking_config"] = {"thinking_budget": _BUDGETS[settings.effort]}
    elif settings.effort:
        dropped.append("effort (the model does not think)")
    for name in ("max_output_tokens", "temperature", "top_p"):
        value = getattr(settings, name)
        if value is not None:
            fields[name] = value
    if settings.cache_ttl:
        dropped.append("cache_ttl (Gemini caches repeated prefixes implicitly)")
    for key, value in settings.extra.items():
        if key in _OWN_FIELDS:
            dropped.append(f"extra.{key} (set by Retinue)")
        else:
            fields[key] = value
    return fields, dropped


def build_config(
    model: str,
    messages: Sequence[Message],
    tools: Sequence[ToolSpec],
    settings: ModelSettings | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``(contents, config)`` of one ``generate_content`` call (a plain function, no I/O)."""
    system, contents = request_contents(messages, model)
    config: dict[str, Any] = {"automatic_function_calling": {"disable": True}}
    if system is not None:
        config["system_instruction"] = system
    if tools:
        config["tools"] = tools_to_gemini(tools)
    if settings is not None:
        config.update(settings_config(model, settings)[0])
    return contents, config


def _default_url(vertexai: bool) -> str:
    """Where the SDK sends requests by default (Vertex AI: by ``GOOGLE_CLOUD_LOCATION``)."""
    if not vertexai:
        return DEFAULT_BASE_URL
    where = os.environ.get("GOOGLE_CLOUD_LOCATION") or "global"
    if where == "global":
        return "https://aiplatform.googleapis.com"
    return f"https://{where}-aiplatform.googleapis.com"


def _vertex() -> bool:
    return os.environ.get(VERTEX_VAR, "").strip().lower() in ("1", "true", "yes")


class GeminiModel:
    """A Gemini model; ``name`` is ``"gemini:<model>"``.

    ``api_key`` defaults to ``GOOGLE_API_KEY`` / ``GEMINI_API_KEY`` and ``base_url`` to
    ``GOOGLE_GEMINI_BASE_URL`` (Google's endpoint otherwise); a custom ``base_url`` needs no
    key. ``vertexai`` (default: ``GOOGLE_GENAI_USE_VERTEXAI``) sends the requests to Vertex AI
    with the project, location and credentials the SDK reads (``base_url`` then defaults to
    ``GOOGLE_VERTEX_BASE_URL``). ``retry_delay`` is the first backoff in seconds.
    """

    def __init__(
        self,
        name: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        vertexai: bool | None = None,
        max_retries: int = 3,
        timeout: float = 120.0,
        retry_delay: float = 1.0,
        settings: ModelSettings | None = None,
    ) -> None:
        self._model = name
        self.vertexai = _vertex() if vertexai is None else vertexai
        url_var = "GOOGLE_VERTEX_BASE_URL" if self.vertexai else URL_VAR
        custom = base_url or os.environ.get(url_var)
        self._custom = bool(custom)
        self.base_url = (custom or _default_url(self.vertexai)).rstrip("/")
        if self.vertexai:
            # the SDK reads the project, location, credentials or express-mode key itself
            self._key = api_key
        else:
            key = api_key or next((os.environ[v] for v in KEY_VARS if os.environ.get(v)), None)
            if not key and not custom:
                raise ConfigError(
                    f"no API key for {self.base_url}: set GEMINI_API_KEY (or GOOGLE_API_KEY), "
                    f"or {VERTEX_VAR}=true with GOOGLE_CLOUD_PROJECT for Vertex AI"
                )
            self._key = key or PLACEHOLDER_KEY
        if settings is not None:
            max_retries = max_retries if settings.max_retries is None else settings.max_retries
            timeout = settings.timeout or timeout
            for dropped in settings_config(name, settings)[1]:
                log.warning("gemini:%s: setting %s left out", name, dropped)
        self.max_retries = max_retries
        self.timeout = timeout
        self.retry_delay = retry_delay
        self.settings = settings
        self._info = ProviderInfo("gemini", "GEMINI_API_KEY", URL_VAR, self.base_url, max_retries)
        self._clients: PerLoopClients[_Closing] = PerLoopClients(self._client)

    @property
    def name(self) -> str:
        return f"gemini:{self._model}"

    def with_settings(self, settings: ModelSettings) -> GeminiModel:
        """This model asked with ``settings`` merged over its own (a new client)."""
        merged = settings if self.settings is None else self.settings.merged(settings)
        return GeminiModel(
            self._model,
            base_url=self.base_url if self._custom else None,
            api_key=self._key,
            vertexai=self.vertexai,
            max_retries=self.max_retries,
            timeout=self.timeout,
            retry_delay=self.retry_delay,
            settings=merged,
        )

    def _client(self) -> _Closing:
        from google import genai
        from google.genai import types

        http = types.HttpOptions(
            timeout=int(self.timeout * 1000),  # milliseconds
            retry_options=types.HttpRetryOptions(
                attempts=self.max_retries + 1,
                initial_delay=self.retry_delay,
                max_delay=max(self.retry_delay, 30.0),
                http_status_codes=RETRIED,
            ),
        )
        if self._custom:
            http.base_url = self.base_url
            if not self.vertexai:
                http.api_version = "v1beta"
        if self.vertexai:
            client = genai.Client(vertexai=True, api_key=self._key, http_options=http)
        else:
            client = genai.Client(api_key=self._key, http_options=http)
        return _Closing(client.aio)

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
        from google.genai import errors

        check_request_allowed(self.base_url)
        contents, config = build_config(self._model, messages, tools, self.settings)
        client = self._clients.get().aio
        try:
            if on_text is None:
                reply = await client.models.generate_content(
                    model=self._model, contents=contents, config=config
                )
                return response_from_json(_json(reply), self._model)
            return await self._streamed(client, contents, config, on_text)
        except errors.APIError as exc:
            raise self._status_error(exc) from None
        except _transport_errors() as exc:
            timed_out = "Timeout" in type(exc).__name__
            raise connection_error(self._info, exc, timed_out=timed_out) from None
        except ValueError as exc:  # the SDK's own checks (UnknownApiResponseError ...)
            raise ModelError(f"gemini ({self.base_url}): {_line(exc)}") from None

    async def _streamed(
        self,
        client: Any,
        contents: list[dict[str, Any]],
        config: dict[str, Any],
        on_text: TextCallback,
    ) -> ModelResponse:
        parts: list[Any] = []
        usage: Any = None
        reason: Any = None
        stream = await client.models.generate_content_stream(
            model=self._model, contents=contents, config=config
        )
        async for chunk in stream:
            data = _json(chunk)
            check_blocked(data)
            usage = data.get("usage_metadata") or usage
            if not data.get("candidates"):
                continue
            candidate = first_candidate(data)
            reason = candidate.get("finish_reason") or reason
            for part in (candidate.get("content") or {}).get("parts") or ():
                parts.append(part)
                if part.get("text") and not part.get("thought"):
                    on_text(str(part["text"]))
        if reason is None and not parts:
            raise ModelError(f"gemini ({self.base_url}): the stream ended without an answer")
        return response_from_parts(parts, self._model, reason, usage)

    def _status_error(self, exc: Any) -> ModelError:
        status = int(exc.code or 500)
        body = exc.details if isinstance(exc.details, dict) else {}
        message, _ = error_detail(body, str(exc.message or exc))
        # "The input token count (N) exceeds the maximum number of tokens allowed (M)."
        if status == 400 and "exceeds the maximum number of tokens" in message:
            return ContextTooLongError(
                f"gemini ({self.base_url}): the request exceeds the model's context window "
                f"({message})",
                status_code=status,
            )
        if status in (401, 403) and self.vertexai:
            return ModelError(
                f"gemini (Vertex AI) refused the credentials (HTTP {status}: {message}); "
                "check GOOGLE_CLOUD_PROJECT, GOOGLE_CLOUD_LOCATION and the credentials",
                status_code=status,
            )
        return status_error(self._info, status, body, message)


class _Closing:
    """The SDK's async client, closable as :class:`PerLoopClients` expects."""

    def __init__(self, aio: Any) -> None:
        self.aio = aio

    async def close(self) -> None:
        await self.aio.aclose()


def _transport_errors() -> tuple[type[BaseException], ...]:
    """The HTTP clients' transport errors (the SDK sends with ``httpx2`` where it is
    installed, ``httpx`` otherwise)."""
    import httpx

    found: list[type[BaseException]] = [httpx.TransportError]
    try:
        import httpx2  # pyright: ignore[reportMissingImports]

        found.append(httpx2.TransportError)
    except ImportError:
        pass
    return tuple(found)


def _json(reply: Any) -> dict[str, Any]:
    """The SDK's typed response as JSON (snake_case keys, signatures in base64)."""
    data = reply.model_dump(mode="json", exclude_none=True)
    data.pop("sdk_http_response", None)
    return data


def _line(value: object) -> str:
    return " ".join(str(value).split())[:500]
