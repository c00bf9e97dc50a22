"""The shared task list (issue 31, item 2) where sessions are shown: ``/v1/sessions``'
``tasks`` (by main agent id, for the listed sessions' trees and for ``?team=``), ``retinue
sessions`` (a real process) and the chat's ``/sessions``; model-written text escaped."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import pytest
from rich.console import Console
from serverkit import Serve
from test_cli_remote import retinue

from retinue.cli.chat import ChatRepl
from retinue.cli.render import task_table
from retinue.config import Settings
from retinue.runtime import Runtime
from retinue.testing import ScriptedModel, call_tool

pytestmark = pytest.mark.timeout(60)

HELPER = """---
name: helper
description: Helps.
tools: [TaskList, TaskUpdate]
model: scripted:slow
---
You help.
"""
SUBJECT = "[red]Fake[/red] <b>ship</b>"


def test_the_trees_task_list_is_in_the_sessions_listing_and_in_retinue_sessions(
    serve: Serve, tmp_path: Path
) -> None:
    (tmp_path / ".retinue" / "agents" / "helper.md").write_text(HELPER)
    main = ScriptedModel(
        [
            call_tool("TaskCreate", {"subject": SUBJECT}),
            call_tool("TaskCreate", {"subject": "test", "blocked_by": [1]}),
            call_tool("SubAgent", {"task": "take #1", "role": "helper", "interactive": True}),
            "ok",
        ]
    )
    helper = ScriptedModel([call_tool("TaskUpdate", {"id": 1, "status": "in_progress"}), "took it"])
    server = serve(main, helper, memory=True)
    with server.client() as client:
        sent = client.post(
            "/v1/conversations/c/messages", json={"content": "go", "keep_sessions": True}
        )
        assert sent.json()["content"] == "ok"
        listed = client.get("/v1/sessions").json()
        alone = client.get("/v1/sessions", params={"parent": "nobody", "team": "conv-c"}).json()
        other = client.get("/v1/sessions", params={"parent": "x", "team": "conv-zzz"}).json()
    first, second = listed["tasks"]["conv-c"]
    assert (first["id"], first["subject"], first["status"]) == (1, SUBJECT, "in_progress")
    assert first["owner"] == "conv-c/helper" and second["blocked_by"] == [1]
    assert alone["sessions"] == [] and alone["tasks"] == listed["tasks"]
    assert other["tasks"] == {}

    shown = retinue(["sessions", "--url", server.url], tmp_path, COLUMNS="200")
    assert shown.returncode == 0, shown.stderr
    assert "task list of conv-c: 0 of 2 done" in shown.stdout
    assert "[red]Fake[/red] <b>ship</b>" in shown.stdout  # printed, not read as markup
    assert "in_progress" in shown.stdout and "conv-c/helper" in shown.stdout
    as_json = retinue(["sessions", "--json", "--url", server.url], tmp_path)
    assert '"tasks"' in as_json.stdout and '"blocked_by"' in as_json.stdout


def test_the_task_table_escapes_and_bounds_what_models_wrote() -> None:
    tasks = [{"id": i, "subject": f"[b]t{i}[/b]\nnext", "status": "pending"} for i in range(60)]
    tasks[0] |= {"owner": "[red]x[/red]", "blocked_by": [2, 3], "status": "completed"}
    console = Console(file=io.StringIO(), width=200)
    console.print(task_table("[main]", tasks, limit=5))
    printed = console.file.getvalue()  # type: ignore[attr-defined]
    assert "task list of [main]: 1 of 60 done" in printed
    assert "[b]t0[/b] next" in printed and "[red]x[/red]" in printed and "#2, #3" in printed
    assert "55 more" in printed and "t5" not in printed


def test_the_chats_sessions_command_shows_the_conversations_task_list(tmp_path: Path) -> None:
    settings = Settings.load(home=tmp_path / "home", workspace=tmp_path)
    model = ScriptedModel([call_tool("TaskCreate", {"subject": SUBJECT}), "planned"])
    runtime = Runtime.create(settings, model=model)
    repl = ChatRepl(runtime)
    repl.err = Console(file=io.StringIO(), width=200)
    with asyncio.Runner() as runner:
        runner.run(repl.conversation.send("plan"))
        repl._tasks(runner)  # what /sessions prints first
        runner.run(repl.conversation.close())
    printed = repl.err.file.getvalue()  # type: ignore[attr-defined]
    assert "task list of main: 0 of 1 done" in printed and SUBJECT in printed
