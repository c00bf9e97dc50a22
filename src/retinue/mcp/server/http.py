"""``retinue mcp serve --http``: each MCP session belongs to the token that opened it.

The Guard (:mod:`retinue.server.security`) puts each request's
:class:`~retinue.server.tokens.Principal` in its scope; :class:`SessionOwners` shows it to
the MCP SDK as the request's user, and the SDK binds a session to the user that opened it:
another token that sends that session's id is answered as if it did not exist (404).
Without a user the SDK binds nothing, and a token that learned another's session id could
open that session's GET stream (hearing its tasks' status and progress notifications) or
post into it (a response to the elicitation its request waits on)."""

from __future__ import annotations

import json

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from starlette.types import ASGIApp, Receive, Scope, Send

from retinue.server.tokens import Principal

__all__ = ["SessionOwners"]


class SessionOwners:
    """ASGI middleware, inside the Guard: each HTTP request's principal as its user."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            state = scope.get("state")
            found = state.get("principal") if isinstance(state, dict) else None
            who = found if isinstance(found, Principal) else None
            name = json.dumps([who.name, who.tenant] if who is not None else None)
            scope["user"] = AuthenticatedUser(AccessToken(token="", client_id=name, scopes=[]))
        await self.app(scope, receive, send)
