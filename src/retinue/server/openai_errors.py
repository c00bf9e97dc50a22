"""Errors in OpenAI's shape, for the OpenAI-compatible routes: the front door's refusals
(401, 413, ...) and the routes' own errors alike, so an OpenAI client (the ``openai`` SDK,
LangChain, litellm) shows the message instead of only "Error code: 401"::

    {"error": {"message": "...", "type": "invalid_request_error", "param": null, "code": 400}}

``code`` is the HTTP status (OpenAI's own codes are strings, which clients only display).
"""

from __future__ import annotations

from typing import Any

__all__ = ["is_openai_path", "openai_error"]

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    413: "invalid_request_error",
    421: "permission_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}


def is_openai_path(path: str) -> bool:
    """Whether ``path`` is one of the OpenAI-compatible routes (``/v1/models``, a model under
    it, ``/v1/chat/completions``)."""
    return path in ("/v1/models", "/v1/chat/completions") or path.startswith("/v1/models/")


def openai_error(status: int, message: str, param: str | None = None) -> dict[str, Any]:
    """An error in OpenAI's shape; ``param`` names the request field at fault, if one is."""
    kind = _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": param, "code": status}}
