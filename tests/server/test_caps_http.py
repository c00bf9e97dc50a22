"""The fan-out caps over the HTTP service (a real uvicorn server, the models scripted): a
conversation that keeps delegating is stopped at the cap, says why, and leaves no session."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from serverkit import Serve

from retinue.testing import ScriptedModel, call_tool

pytestmark = pytest.mark.timeout(60)


def sse_events(text: str) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        out.append((lines["event"], json.loads(lines["data"])))
    return out


def delegate(task: str):
    return call_tool("SubAgent", {"task": task, "role": "researcher"})


def configure(tmp_path: Path, text: str) -> None:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text(text)


def test_a_conversation_that_keeps_delegating_is_stopped_at_the_cap(
    serve: Serve, tmp_path: Path
) -> None:
    configure(tmp_path, "max_subagents_per_run = 2\n")
    model = ScriptedModel(
        [
            delegate("look at a.py"),
            "a.py loads the config.",  # the researcher (the default model)
            delegate("look at b.py"),
            "b.py calls it.",
            *(delegate(f"look at {n}.py") for n in "cdefg"),
        ]
    )
    server = serve(model)
    with server.client() as client:
        response = client.post(
            "/v1/conversations/fan/messages?stream=true", json={"content": "map the code"}
        )
        assert response.status_code == 200, response.text
        live = client.get("/v1/sessions").json()["sessions"]
    events = sse_events(response.text)
    kind, result = events[-1]
    assert kind == "result"
    assert result["stop_reason"] == "repeated_call"
    assert "kept starting sub-agents after reaching the limit" in result["content"]
    assert "max_subagents_per_run=2" in result["content"]
    reached = [d for k, d in events if k == "limit_reached"]
    assert [(d["limit"], d["value"], d["stopped"]) for d in reached] == [
        ("subagents_per_run", 2, False),
        ("subagents_per_run", 2, False),
        ("subagents_per_run", 2, True),
    ]
    assert all(d["agent_id"] == "conv-fan" for d in reached)
    assert "this run has started 2 sub-agent sessions" in reached[0]["reason"]
    assert model.remaining == 2  # stopped after the third refusal, not at the script's end
    assert live == []  # no session left behind
    assert server.runtime.manager.registry.held_by() == []


def test_the_run_cap_starts_again_with_the_next_message(serve: Serve, tmp_path: Path) -> None:
    configure(tmp_path, "max_subagents_per_run = 1\n")
    model = ScriptedModel(
        [
            delegate("look at a.py"),
            "a.py loads the config.",  # the researcher
            delegate("look at b.py"),  # refused: this run started one, the cap
            "Asked once.",
            delegate("look at b.py"),  # the next message: a new run, one may start
            "b.py calls it.",
            "Asked again.",
        ]
    )
    server = serve(model)
    with server.client() as client:
        first = client.post("/v1/conversations/c/messages", json={"content": "go"})
        assert first.json()["content"] == "Asked once.", first.text
        assert "max_subagents_per_run=1" in model.calls[3].messages[-1].content
        second = client.post("/v1/conversations/c/messages", json={"content": "again"})
        assert second.json()["content"] == "Asked again.", second.text
        assert model.calls[6].messages[-1].content == "b.py calls it."
        assert client.get("/v1/sessions").json()["sessions"] == []
    model.assert_done()
