"""Schemathesis against the service's own OpenAPI schema, on a real server (bounded examples).

Every operation is called with generated requests, valid and invalid, with the token: no
answer may be a server error, and every error is the documented one-line JSON,
``{"error": "..."}`` (OpenAI's ``{"error": {"message": ...}}`` on its routes). The models
answer at once, so the routes that run turns are covered too.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from serverkit import ServerThread

from retinue.config import Settings
from retinue.llm.base import ToolSpec
from retinue.messages import Message
from retinue.runtime import Runtime
from retinue.server import create_app
from retinue.server.openai_errors import is_openai_path
from retinue.server.security import Security
from retinue.testing import ScriptedModel

pytestmark = pytest.mark.timeout(60)


def _answer(_m: Sequence[Message], _t: Sequence[ToolSpec]) -> str:
    return "ok"


def _runtime(home: Path, workspace: Path, *, memory: bool) -> Runtime:
    settings = Settings.load(home=home, workspace=workspace)
    model = ScriptedModel(responder=_answer)
    return Runtime.create(settings, model=model, model_for=lambda _s: model, with_memory=memory)


def _service_schema() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        app = create_app(_runtime(Path(tmp), Path(tmp), memory=False), Security.build("x"))
        return app.openapi()


schema = schemathesis.openapi.from_dict(_service_schema())
SLOW_IS_FINE = [HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    root = tmp_path_factory.mktemp("fuzz")
    started = ServerThread(_runtime(root / "home", root, memory=True)).start()
    yield started
    started.stop()


@schemathesis.check
def one_line_json_error(
    _ctx: schemathesis.CheckContext, response: schemathesis.Response, case: schemathesis.Case
) -> bool | None:
    """An error answer is one line of JSON: ``{"error": "<text>"}`` (OpenAI's shape on its
    routes)."""
    if response.status_code < 400:
        return None
    text = response.content.decode()
    assert "\n" not in text.strip(), f"error body spans lines: {text[:200]!r}"
    body = json.loads(text)
    assert isinstance(body, dict) and list(body) == ["error"], f"not an error object: {text!r}"
    error = body["error"]
    if isinstance(error, dict) and is_openai_path(case.formatted_path):
        assert isinstance(error.get("message"), str) and error["message"], text
    else:
        assert isinstance(error, str) and error, f"error is not a text: {text!r}"
    return True


@schema.parametrize()
@settings(max_examples=12, deadline=None, suppress_health_check=SLOW_IS_FINE)
def test_no_server_errors_and_every_error_is_one_line_json(
    case: schemathesis.Case, server: ServerThread
) -> None:
    response = case.call(
        base_url=server.url, headers={"Authorization": f"Bearer {server.token}"}, timeout=20
    )
    case.validate_response(response, checks=[not_a_server_error, one_line_json_error])


def test_the_schema_is_served_with_the_token_only(server: ServerThread) -> None:
    with server.client(token=False) as anonymous:
        assert anonymous.get("/openapi.json").status_code == 401
    with server.client() as client:
        paths = client.get("/openapi.json").json()["paths"]
    assert {"/v1/chat/completions", "/v1/models", "/v1/conversations/{cid}"} <= set(paths)
