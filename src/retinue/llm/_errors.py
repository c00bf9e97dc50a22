"""One-line :class:`ModelError` messages for provider failures, shared by the adapters.

Each adapter catches its SDK's exceptions and calls one of these builders; the message names
the setting a user would fix (the key variable, the base-URL variable) and never carries a
stack trace.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from retinue.errors import ContextTooLongError, ModelError

__all__ = ["ProviderInfo", "connection_error", "is_context_length", "status_error"]

_CONTEXT_RE = re.compile(
    r"context[ _-]?(length|window)|maximum context|prompt is too long|too many tokens",
    re.IGNORECASE,
)
_RETRIED_STATUSES = frozenset({408, 409, 429})


@dataclass(frozen=True, slots=True)
class ProviderInfo:
    """What an error message needs to know about the provider that failed."""

    label: str  # "openai" / "anthropic"
    key_var: str  # "OPENAI_API_KEY"
    url_var: str  # "OPENAI_BASE_URL"
    base_url: str
    max_retries: int


def error_detail(body: object, fallback: str) -> tuple[str, str]:
    """The human message and machine code carried by an error body (either may be empty)."""
    if isinstance(body, dict):
        inner: Any = body.get("error", body)
        if isinstance(inner, dict):
            message = str(inner.get("message") or fallback)
            code = str(inner.get("code") or inner.get("type") or "")
            return _one_line(message), code
    return _one_line(fallback), ""


def is_context_length(status: int, message: str, code: str) -> bool:
    """Whether a refused request means "the prompt does not fit the context window"."""
    if status not in (400, 413, 422):
        return False
    return code == "context_length_exceeded" or bool(_CONTEXT_RE.search(message))


def status_error(info: ProviderInfo, status: int, body: object, fallback: str) -> ModelError:
    """Translate an HTTP error status (after the SDK's retries) into a ModelError."""
    message, code = error_detail(body, fallback)
    where = f"{info.label} ({info.base_url})"
    if status in (401, 403):
        return ModelError(
            f"{where} refused the API key (HTTP {status}: {message}); "
            f"set {info.key_var} to a valid key",
            status_code=status,
        )
    if is_context_length(status, message, code):
        return ContextTooLongError(
            f"{where}: the request exceeds the model's context window ({message})",
            status_code=status,
        )
    if (status in _RETRIED_STATUSES or status >= 500) and info.max_retries > 0:
        attempts = info.max_retries + 1
        return ModelError(
            f"{where} answered HTTP {status} on all {attempts} attempts "
            f"(retries exhausted): {message}",
            status_code=status,
        )
    if status == 404:
        return ModelError(
            f"{where} answered HTTP 404 ({message}); check the model name and {info.url_var}",
            status_code=status,
        )
    return ModelError(f"{where} answered HTTP {status}: {message}", status_code=status)


def connection_error(info: ProviderInfo, exc: BaseException, *, timed_out: bool) -> ModelError:
    """A request that never got an answer (refused, unreachable, or timed out)."""
    cause = exc.__cause__ or exc
    what = "timed out" if timed_out else "could not connect"
    detail = _one_line(str(cause)) or type(cause).__name__
    return ModelError(
        f"{info.label}: {what} to {info.base_url} after {info.max_retries + 1} attempt(s) "
        f"({detail}); check {info.url_var} and that the server is running"
    )


def _one_line(text: str) -> str:
    return " ".join(text.split())[:500]
