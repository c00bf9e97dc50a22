"""``/healthz`` reads no session's files, and TodoWrite lists go with their session and their
conversation (issue 25, item 11), against a real server on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote

import pytest
from serverkit import Serve

import retinue.subagents.registry as registry
from retinue.testing import ScriptedModel, call_tool

pytestmark = pytest.mark.timeout(120)

PLANNER = """---
name: planner
description: Plans work as a task list.
tools: TodoWrite
model: scripted:slow
---
You plan.
"""
TODOS = [{"content": "step one", "status": "in_progress"}, {"content": "step two"}]


def todo_ids(home: Path) -> set[str]:
    """The agent ids that have a task list on disk."""
    folder = home / "todos"
    return {unquote(p.stem) for p in folder.glob("*.json")} if folder.is_dir() else set()


def opening(n: int) -> list:
    """The main model's turn: open ``n`` interactive planner sessions, then answer."""
    return [
        *(
            call_tool(
                "SubAgent",
                {"task": "plan", "role": "planner", "interactive": True, "instance": f"p{i}"},
            )
            for i in range(n)
        ),
        "opened",
    ]


def test_healthz_reads_no_task_list_however_many_sessions_live(
    serve: Serve, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".retinue" / "agents" / "planner.md").write_text(PLANNER)
    sessions = 12
    planner = ScriptedModel(
        [step for _ in range(sessions) for step in (call_tool("TodoWrite", {"todos": TODOS}), "ok")]
    )
    server = serve(ScriptedModel(opening(sessions)), planner)
    reads: list[str] = []
    real = registry.load_todos

    def counted(data_dir: Path, agent_id: str, *, since: float = 0.0):  # type: ignore[no-untyped-def]
        reads.append(agent_id)
        return real(data_dir, agent_id, since=since)

    monkeypatch.setattr(registry, "load_todos", counted)
    with server.client() as client:
        sent = client.post("/v1/conversations/c/messages",
                           json={"content": "plan", "keep_sessions": True})  # fmt: skip
        assert sent.status_code == 200, sent.text
        assert len(todo_ids(tmp_path / "home")) == sessions
        reads.clear()
        with server.client(token=False) as anonymous:
            for _ in range(20):
                health = anonymous.get("/healthz").json()
                assert health == {"status": "ok", "model": "scripted:model", "sessions": sessions}
        assert reads == []  # no session's file was read, however many calls
        listed = client.get("/v1/sessions").json()["sessions"]
        assert len(reads) == sessions and all(s["todos"] for s in listed)  # the lists are there


def test_task_lists_go_with_their_session_and_their_conversation(
    serve: Serve, tmp_path: Path
) -> None:
    (tmp_path / ".retinue" / "agents" / "planner.md").write_text(PLANNER)
    home = tmp_path / "home"
    own_list = call_tool("TodoWrite", {"todos": TODOS})
    main = ScriptedModel(
        [own_list, *opening(2), *opening(1), own_list, "kept"]  # c: 2 kept, d: 1 ended, e: own
    )
    planner = ScriptedModel(
        [step for _ in range(3) for step in (call_tool("TodoWrite", {"todos": TODOS}), "ok")]
    )
    server = serve(main, planner)
    with server.client() as client:
        post = client.post
        post("/v1/conversations/c/messages", json={"content": "go", "keep_sessions": True})
        assert todo_ids(home) == {"conv-c", "conv-c/planner:p0", "conv-c/planner:p1"}
        post("/v1/conversations/d/messages", json={"content": "go"})  # its session ends
        assert "conv-d/planner:p0" not in todo_ids(home)
        post("/v1/conversations/e/messages", json={"content": "go"})
        assert todo_ids(home) == {"conv-c", "conv-c/planner:p0", "conv-c/planner:p1", "conv-e"}
        deleted = client.delete("/v1/conversations/c")
        assert deleted.status_code == 200, deleted.text
        assert todo_ids(home) == {"conv-e"}  # c's lists went with it; e's stay
