"""Where trace context and cost show outside the engine: a ``retinue serve`` request that
carries ``traceparent`` (its turns join the caller's trace), a session's cost in ``GET
/v1/sessions``, and the CLI's token line."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from tracekit import Traced

from retinue.cli.render import _tokens
from retinue.config import Settings
from retinue.runtime import Runtime
from retinue.telemetry.prices import set_prices
from retinue.testing import ScriptedModel, call_tool

sys.path.insert(0, str(Path(__file__).parents[1] / "server"))
from serverkit import ServerThread  # pyright: ignore[reportMissingImports]

pytestmark = pytest.mark.timeout(60)

HELPER = """---
name: helper
description: Helps.
tools: [Read]
model: scripted:helper
---
You help.
"""
TRACE = "0af7651916cd43dd8448eb211c80319c"
PARENT = "b7ad6b7169203331"


def test_a_served_turn_joins_the_callers_trace_and_sessions_show_their_cost(
    tmp_path: Path, traced: Traced
) -> None:
    agents = tmp_path / ".retinue" / "agents"
    agents.mkdir(parents=True)
    (agents / "helper.md").write_text(HELPER)
    helper = ScriptedModel(["on it"], name="scripted:helper")
    main = ScriptedModel(
        [call_tool("SubAgent", {"task": "help", "role": "helper", "interactive": True}), "ok"],
        name="scripted:main",
    )
    settings = Settings.load(home=tmp_path / "home", workspace=tmp_path)
    runtime = Runtime.create(settings, model=main, model_for=lambda _s: helper, with_memory=False)
    set_prices({"scripted:helper": {"input": 1000.0, "output": 2000.0}})
    server = ServerThread(runtime).start()
    try:
        with server.client() as client:
            answer = client.post(
                "/v1/conversations/c1/messages",
                json={"content": "go", "keep_sessions": True},
                headers={"traceparent": f"00-{TRACE}-{PARENT}-01"},
            )
            assert answer.status_code == 200, answer.text
            (session,) = client.get("/v1/sessions").json()["sessions"]
    finally:
        server.stop()
        set_prices(None)
    expected = (session["input_tokens"] * 1000 + session["output_tokens"] * 2000) / 1e6
    assert session["role"] == "helper" and session["cost_usd"] == pytest.approx(expected)
    spans = traced.spans()
    (root,) = [s for s in spans if s.name == "invoke_agent main"]
    assert root.context is not None and root.parent is not None
    assert f"{root.context.trace_id:032x}" == TRACE and f"{root.parent.span_id:016x}" == PARENT
    assert root.parent.is_remote
    (child,) = [s for s in spans if s.name == "invoke_agent helper"]
    assert child.context is not None and f"{child.context.trace_id:032x}" == TRACE


def test_the_token_line_says_what_a_call_cost_or_that_it_is_unknown() -> None:
    line = _tokens({"input_tokens": 1234, "output_tokens": 56, "cost_usd": 0.0123})
    assert line == "1,234 in / 56 out tokens, $0.0123"
    assert _tokens({"input_tokens": 1, "output_tokens": 1, "cost_usd": None}).endswith(
        ", cost unknown"
    )
    assert "cost" not in _tokens({"input_tokens": 1, "output_tokens": 1})  # (a summary call)


def test_a_service_conversation_stops_at_its_money_budget(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "config.toml").write_text(
        "max_budget_usd = 0.001\n"
        "[model_prices]\n'scripted:main' = { input = 1000, output = 1000 }\n",
        encoding="utf-8",
    )
    main = ScriptedModel(["first", "second"], name="scripted:main")
    settings = Settings.load(home=tmp_path / "home", workspace=tmp_path)
    runtime = Runtime.create(settings, model=main, with_memory=False)
    server = ServerThread(runtime).start()
    try:
        with server.client() as client:
            first = client.post("/v1/conversations/c1/messages", json={"content": "hi"})
            assert first.status_code == 200 and first.json()["content"] == "first"
            again = client.post("/v1/conversations/c1/messages", json={"content": "more"})
            other = client.post("/v1/conversations/c2/messages", json={"content": "hi"})
    finally:
        server.stop()
        set_prices(None)
    assert again.status_code >= 400
    assert "its budget is $0.001" in again.text and "Traceback" not in again.text
    assert other.status_code == 200 and other.json()["content"] == "second"  # per conversation
    assert main.call_count == 2
