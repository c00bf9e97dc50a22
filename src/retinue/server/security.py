"""The service's front door: bearer token, Host and Origin checks, CORS, body size.

:class:`Guard` is an ASGI middleware that looks at every HTTP request before the app does:

1. ``Host`` must name an allowed host (loopback names by default): a page on another
   site that rebinds its DNS name to 127.0.0.1 still sends its own name, and gets 421.
2. An ``Origin`` header, when present, must be an allowed host's or a configured CORS
   origin (403 otherwise). Only configured CORS origins get CORS headers; by default none.
3. Every path except ``/healthz`` and the web page's files (``GET``/``HEAD`` of
   :data:`~retinue.server.page.PAGE_PATHS`: ``/`` and its script and style sheet, which
   hold no data) needs ``Authorization: Bearer <token>`` (401 otherwise): the service's
   token, compared in constant time, or a named token of :mod:`retinue.server.tokens`
   (found by its SHA-256). The request's :class:`~retinue.server.tokens.Principal` is put in
   ``scope["state"]["principal"]`` (``request.state.principal``), which decides the tenant
   it sees. The page asks for a token and sends it with every API call.
4. A body longer than the limit is refused with 413 as soon as its ``Content-Length`` says
   so, and otherwise as soon as that many bytes have arrived: it is never read in full. The
   routes that take images and PDFs (a conversation's messages, ``/v1/chat/completions``:
   :func:`takes_media`) have a limit of their own, ``max_media_body``.

The token lives in ``<data dir>/server-token`` (mode 0600), created on first start;
``RETINUE_TOKEN`` overrides it. On the OpenAI-compatible routes every refusal is in OpenAI's
error shape (see :func:`retinue.server.openai_errors.openai_error`).
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from retinue.server.openai_errors import is_openai_path, openai_error
from retinue.server.page import PAGE_PATHS
from retinue.server.tokens import Principal, TokenBook

__all__ = [
    "DEFAULT_MAX_BODY",
    "DEFAULT_MAX_MEDIA_BODY",
    "LOOPBACK_HOSTS",
    "SERVICE",
    "TOKEN_ENV",
    "TOKEN_FILE",
    "Guard",
    "Security",
    "configured_token",
    "ensure_token",
    "host_name",
    "is_loopback",
    "takes_media",
]

TOKEN_FILE = "server-token"
TOKEN_ENV = "RETINUE_TOKEN"
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
DEFAULT_MAX_BODY = 1_000_000
"""Bytes a request body may have (a message of a million characters is already absurd)."""
DEFAULT_MAX_MEDIA_BODY = 64 * 2**20
"""Bytes a body may have on the routes that take images and PDFs (a 20 MB part is 27 MB of
base64)."""


def is_loopback(host: str) -> bool:
    """Whether listening on ``host`` is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def configured_token(home: Path) -> str | None:
    """``RETINUE_TOKEN``, else the token file's content, else ``None``."""
    if token := os.environ.get(TOKEN_ENV, "").strip():
        return token
    try:
        return (home / TOKEN_FILE).read_text(encoding="utf-8").strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def ensure_token(home: Path) -> tuple[str, bool]:
    """The configured token, or a new one written to ``home/server-token`` (mode 0600).

    Returns the token and whether it was created now. A token file readable by others is
    made private again.
    """
    path = home / TOKEN_FILE
    if path.exists() and path.stat().st_mode & 0o077:
        path.chmod(0o600)
    if token := configured_token(home):
        return token, False
    from retinue.config import make_private_dir

    make_private_dir(home)
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        os.fchmod(f.fileno(), 0o600)
        f.write(token + "\n")
    return token, True


def host_name(value: str) -> str:
    """The host of a ``Host`` header or ``host:port``, lower case, without port or ``[]``."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    if value.count(":") == 1:
        return value.split(":", 1)[0]
    return value


@dataclass(frozen=True, slots=True)
class Security:
    """What :class:`Guard` enforces."""

    token: str
    allowed_hosts: frozenset[str] = LOOPBACK_HOSTS
    cors_origins: frozenset[str] = field(default_factory=frozenset)
    max_body: int = DEFAULT_MAX_BODY
    tokens: TokenBook | None = None  # named tokens, each a tenant (None: the token only)
    max_media_body: int = DEFAULT_MAX_MEDIA_BODY  # on the routes that take media

    def body_limit(self, scope: Scope) -> int:
        """The most bytes the body of this request may have."""
        return max(self.max_body, self.max_media_body) if takes_media(scope) else self.max_body

    @classmethod
    def build(
        cls,
        token: str,
        *,
        listen_host: str = "127.0.0.1",
        allow_hosts: Iterable[str] = (),
        cors_origins: Iterable[str] = (),
        max_body: int = DEFAULT_MAX_BODY,
        tokens: TokenBook | None = None,
        max_media_body: int = DEFAULT_MAX_MEDIA_BODY,
    ) -> Security:
        """The loopback names, the address listened on (unless a wildcard) and ``allow_hosts``."""
        hosts = set(LOOPBACK_HOSTS) | {host_name(h) for h in allow_hosts}
        if listen_host not in ("0.0.0.0", "::", ""):
            hosts.add(host_name(listen_host) if ":" not in listen_host else listen_host.lower())
        origins = frozenset(o.rstrip("/").lower() for o in cors_origins)
        return cls(token, frozenset(hosts), origins, max_body, tokens, max_media_body)

    def host_allowed(self, host: str) -> bool:
        return "*" in self.allowed_hosts or host_name(host) in self.allowed_hosts

    def origin_allowed(self, origin: str) -> bool:
        if origin.lower() in self.cors_origins:
            return True
        parts = urlsplit(origin)
        return parts.scheme in ("http", "https") and (parts.hostname or "") in self.allowed_hosts

    def authorized(self, header: str | None) -> bool:
        return self.principal(header) is not None

    def principal(self, header: str | None) -> Principal | None:
        """Whose token ``Authorization: Bearer <token>`` carries, or None for no token or a
        wrong one."""
        scheme, _, given = (header or "").partition(" ")
        given = given.strip()
        if scheme.lower() != "bearer" or not given or len(given) > 512:
            return None
        if hmac.compare_digest(given.encode(), self.token.encode()):
            return SERVICE
        return self.tokens.find(given) if self.tokens is not None else None


SERVICE = Principal()
"""The holder of the service's own token."""


class Guard:
    """ASGI middleware enforcing a :class:`Security` on every HTTP request."""

    def __init__(self, app: ASGIApp, security: Security) -> None:
        self.app = app
        self.security = security

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        origin = headers.get("origin")
        refusal = self._refusal(scope, headers, origin)
        if refusal is not None and is_openai_path(scope["path"]):
            refusal = _openai(refusal)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        cors = origin is not None and origin.lower() in self.security.cors_origins
        if cors and scope["method"] == "OPTIONS":
            await Response(status_code=204, headers=_preflight(origin or ""))(scope, receive, send)
            return
        await self.app(
            scope, self._limited(scope, receive), _with_cors(send, origin) if cors else send
        )

    def _refusal(self, scope: Scope, headers: Headers, origin: str | None) -> _Refusal | None:
        sec = self.security
        host = headers.get("host", "")
        if not sec.host_allowed(host):
            return _error(
                421, f"host {host_name(host)!r} is not allowed (start the server with --allow-host)"
            )
        if origin is not None and not sec.origin_allowed(origin):
            return _error(403, f"origin {origin!r} is not allowed (see --cors-origin)")
        if scope["method"] == "OPTIONS" and origin and origin.lower() in sec.cors_origins:
            return None  # a CORS preflight carries no credentials
        principal = sec.principal(headers.get("authorization"))
        scope.setdefault("state", {})["principal"] = principal
        if not _public(scope) and principal is None:
            return _error(
                401,
                "missing or wrong bearer token: send 'Authorization: Bearer <token>' "
                f"(the token is in the server's data directory, file {TOKEN_FILE})",
                {"WWW-Authenticate": "Bearer"},
            )
        length = headers.get("content-length")
        limit = sec.body_limit(scope)
        if length is not None and (not length.isdigit() or int(length) > limit):
            return _error(413, f"request body over {limit} bytes")
        return None

    def _limited(self, scope: Scope, receive: Receive) -> Receive:
        limit = self.security.body_limit(scope)
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise HTTPException(413, f"request body over {limit} bytes")
            return message

        return limited


def takes_media(scope: Scope) -> bool:
    """Whether the request goes to a route that takes images and PDFs."""
    path = scope["path"]
    return scope["method"] == "POST" and (
        path == "/v1/chat/completions"
        or (path.startswith("/v1/conversations/") and path.endswith(("/messages", "/upload")))
    )


def _public(scope: Scope) -> bool:
    """Whether the request may go without the token: liveness, or loading the page."""
    path = scope["path"]
    return path == "/healthz" or (scope["method"] in ("GET", "HEAD") and path in PAGE_PATHS)


class _Refusal(JSONResponse):
    def __init__(self, status: int, message: str, headers: dict[str, str] | None) -> None:
        super().__init__({"error": message}, status_code=status, headers=headers)
        self.message, self.extra = message, headers


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> _Refusal:
    return _Refusal(status, message, headers)


def _openai(refusal: _Refusal) -> Response:
    status = refusal.status_code
    return JSONResponse(openai_error(status, refusal.message), status, headers=refusal.extra)


def _preflight(origin: str) -> dict[str, str]:
    return {
        "Access-Control-Allow-Origin": origin,
        "Access-Control-Allow-Methods": "GET, POST, DELETE",
        "Access-Control-Allow-Headers": (
            "Authorization, Content-Type, Accept, X-Retinue-Conversation, X-Retinue-Keep-Sessions"
        ),
        "Access-Control-Max-Age": "600",
        "Vary": "Origin",
    }


def _with_cors(send: Send, origin: str | None) -> Send:
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start" and origin:
            extra = [(b"access-control-allow-origin", origin.encode()), (b"vary", b"Origin")]
            message = {**message, "headers": [*message.get("headers", []), *extra]}
        await send(message)

    return sending
