"""The page's files over HTTP: served without the token, locked down by their headers."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from retinue.server.page import CONTENT_SECURITY_POLICY, PAGE_PATHS
from retinue.testing import ScriptedModel

pytestmark = pytest.mark.timeout(60)

Serve = Callable[..., Any]  # conftest's serve(): a ServerThread (tests/server/serverkit.py)


def test_the_page_loads_without_the_token_and_the_api_still_needs_it(serve: Serve) -> None:
    server = serve(ScriptedModel())
    with server.client(token=False) as anonymous:
        page = anonymous.get("/")
        assert page.status_code == 200
        assert page.headers["content-type"] == "text/html; charset=utf-8"
        assert '<script src="/static/app.js" defer></script>' in page.text
        assert re.search(r"<script>|<style|\son\w+=", page.text) is None  # nothing inline
        kinds = {p: anonymous.get(p).headers["content-type"] for p in PAGE_PATHS}
        assert kinds["/static/app.js"] == "text/javascript; charset=utf-8"
        assert kinds["/static/app.css"] == "text/css; charset=utf-8"
        assert anonymous.head("/static/app.js").status_code == 200
        # only reading the page's own files goes without the token
        assert anonymous.post("/", json={}).status_code == 401
        assert anonymous.get("/static/other.js").status_code == 401
        assert anonymous.get("/static/../v1/conversations").status_code == 401
        assert anonymous.get("/v1/conversations").status_code == 401
    with server.client() as client:
        assert client.get("/static/other.js").status_code == 404
        assert "/" not in client.get("/openapi.json").json()["paths"]  # not in the API schema


def test_the_page_is_locked_down_and_revalidated(serve: Serve) -> None:
    server = serve(ScriptedModel())
    with server.client(token=False) as anonymous:
        for path in PAGE_PATHS:
            answer = anonymous.get(path)
            assert answer.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
            assert answer.headers["x-content-type-options"] == "nosniff"
            assert answer.headers["x-frame-options"] == "DENY"
            assert answer.headers["cache-control"] == "no-cache"
            etag = answer.headers["etag"]
            again = anonymous.get(path, headers={"If-None-Match": etag})
            assert again.status_code == 304 and again.content == b""
            changed = anonymous.get(path, headers={"If-None-Match": '"other"'})
            assert changed.status_code == 200 and changed.content == answer.content
        assert "script-src 'self';" in CONTENT_SECURITY_POLICY  # no inline script runs
        port = server.url.rsplit(":", 1)[1]
        rebound = anonymous.get("/", headers={"Host": f"attacker.example:{port}"})
        assert rebound.status_code == 421
        foreign = anonymous.get("/", headers={"Origin": "http://attacker.example"})
        assert foreign.status_code == 403
