"""A sub-agent's TodoWrite list, seen where sessions are shown: the service's session view,
``retinue sessions`` (a real process) and the chat's sessions table."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console
from serverkit import Serve
from test_cli_remote import retinue

from retinue.cli.render import parse_todos, todos_cell
from retinue.testing import ScriptedModel, call_tool
from retinue.tools.builtin.todo import TodoItem

pytestmark = pytest.mark.timeout(60)

PLANNER = """---
name: planner
description: Plans work as a task list.
tools: TodoWrite
model: scripted:slow
---
You plan.
"""
TODOS = [
    {"content": "Read the [b]spec[/b]", "status": "completed"},
    {"content": "Write the code", "status": "in_progress", "activeForm": "Writing the code"},
    {"content": "Run the tests"},
]


def test_a_sessions_task_list_is_in_its_view_and_in_retinue_sessions(
    serve: Serve, tmp_path: Path
) -> None:
    (tmp_path / ".retinue" / "agents" / "planner.md").write_text(PLANNER)
    main = ScriptedModel(
        [call_tool("SubAgent", {"task": "plan", "role": "planner", "interactive": True}), "ok"]
    )
    planner = ScriptedModel([call_tool("TodoWrite", {"todos": TODOS}), "planned"])
    server = serve(main, planner)
    with server.client() as client:
        sent = client.post(
            "/v1/conversations/c/messages", json={"content": "go", "keep_sessions": True}
        )
        assert sent.json()["content"] == "ok"
        view = client.get("/v1/sessions/conv-c/planner").json()
        listed = client.get("/v1/sessions").json()["sessions"]
    assert [(t["content"], t["status"]) for t in view["todos"]] == [
        ("Read the [b]spec[/b]", "completed"),
        ("Write the code", "in_progress"),
        ("Run the tests", "pending"),
    ]
    assert view["todos"][1]["activeForm"] == "Writing the code"
    assert listed[0]["todos"] == view["todos"]

    shown = retinue(["sessions", "--url", server.url], tmp_path, COLUMNS="200")
    assert shown.returncode == 0, shown.stderr
    assert "1 of 3 done" in shown.stdout
    assert "[~] Write the code" in shown.stdout and "[ ] Run the tests" in shown.stdout
    assert "spec" not in shown.stdout  # finished tasks are counted, not listed
    as_json = retinue(["sessions", "--json", "--url", server.url], tmp_path)
    assert '"content": "Run the tests"' in as_json.stdout


def test_a_new_session_of_the_same_id_starts_with_no_list(serve: Serve, tmp_path: Path) -> None:
    (tmp_path / ".retinue" / "agents" / "planner.md").write_text(PLANNER)
    opens = call_tool("SubAgent", {"task": "plan", "role": "planner", "interactive": True})
    main = ScriptedModel([opens, "first", opens, "second"])
    planner = ScriptedModel([call_tool("TodoWrite", {"todos": TODOS}), "planned", "no list"])
    server = serve(main, planner)
    with server.client() as client:
        path = "/v1/conversations/c/messages"
        client.post(path, json={"content": "go"})  # its session ends with the message
        client.post(path, json={"content": "again", "keep_sessions": True})
        view = client.get("/v1/sessions/conv-c/planner").json()
    assert view["turns"] == 1 and view["todos"] == []  # the first session's list is not its


def test_the_tasks_cell_escapes_markup_and_keeps_to_the_unfinished() -> None:
    items = [TodoItem(content=f"step {n}") for n in range(9)]
    items.insert(0, TodoItem(content="done", status="completed"))
    items.append(TodoItem(content="[red]Fake[/red]\nsecond line " + "x" * 80))
    cell = todos_cell(items)
    lines = cell.splitlines()
    assert lines[0] == "1 of 11 done" and lines[1:3] == ["[ ] step 0", "[ ] step 1"]
    assert lines[-1] == "… 4 more" and len(lines) == 8
    console = Console(file=io.StringIO(), width=200)
    console.print(todos_cell(items[-1:]))
    printed = console.file.getvalue()  # type: ignore[attr-defined]
    assert printed.startswith("0 of 1 done\n[ ] [red]Fake[/red] second line xxx")
    assert printed.rstrip().endswith("…")
    assert parse_todos([{"content": "ok"}, {"content": ""}, "junk", {"status": "x"}]) == [
        TodoItem(content="ok")
    ]
    assert todos_cell([]) == "" and parse_todos(None) == []
