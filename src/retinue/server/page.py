"""The web page at ``/``: a chat with the main agent and the live tree of its sub-agents.

Three hand-written files ship in ``retinue/server/web/`` (no framework, no CDN, no build
step): ``index.html`` at ``/``, ``app.js`` and ``app.css`` under ``/static/``. They hold no
data, so :class:`~retinue.server.security.Guard` serves them without the token
(:data:`PAGE_PATHS`); the page asks for the token and sends it with every API call.

Every answer carries a strict Content-Security-Policy (scripts, styles and connections to
this origin only; no inline code, no frames) and an ``ETag``: the browser revalidates
(``Cache-Control: no-cache``) and gets ``304`` while the files are unchanged.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from fastapi import FastAPI, Request
from starlette.responses import Response

__all__ = ["CONTENT_SECURITY_POLICY", "PAGE_PATHS", "add_page_routes"]

WEB_DIR = Path(__file__).with_name("web")

_FILES = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/static/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/static/app.css": ("app.css", "text/css; charset=utf-8"),
}

PAGE_PATHS = frozenset(_FILES)
"""The paths of the page's files: served to anyone who may reach the host, token or not."""

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "Cache-Control": "no-cache",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}


@dataclass(frozen=True, slots=True)
class _Asset:
    body: bytes
    media_type: str
    etag: str

    @classmethod
    def load(cls, name: str, media_type: str) -> _Asset:
        body = (WEB_DIR / name).read_bytes()
        return cls(body, media_type, f'"{hashlib.sha256(body).hexdigest()[:20]}"')

    def response(self, request: Request) -> Response:
        headers = {**_HEADERS, "ETag": self.etag}
        if self.etag in request.headers.get("if-none-match", ""):
            return Response(status_code=304, headers=headers)
        return Response(self.body, media_type=self.media_type, headers=headers)


def add_page_routes(app: FastAPI) -> None:
    """Serve the page's files (read once, now) at :data:`PAGE_PATHS`."""
    for path, (name, media_type) in _FILES.items():
        app.add_api_route(
            path,
            _endpoint(_Asset.load(name, media_type)),
            methods=["GET", "HEAD"],
            include_in_schema=False,
            name=f"page:{name}",
        )


def _endpoint(asset: _Asset) -> Callable[[Request], Awaitable[Response]]:
    async def serve(request: Request) -> Response:
        return asset.response(request)

    return serve
