"""The chat's ``/sessions`` table shows each session's TodoWrite task list."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_chat import start_chat

from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.testing import ScriptedModel, call_tool

pytestmark = pytest.mark.timeout(60)

PLANNER = """---
name: planner
description: Plans work as a task list.
tools: TodoWrite
---
You plan.
"""


def test_sessions_shows_a_sessions_task_list(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agents = tmp_path / ".retinue" / "agents"
    agents.mkdir(parents=True)
    (agents / "planner.md").write_text(PLANNER)
    todos = [
        {"content": "Read the [b]spec[/b]", "status": "in_progress"},
        {"content": "Write the code"},
        {"content": "Say hello", "status": "completed"},
    ]
    model = ScriptedModel(
        [
            call_tool("SubAgent", {"task": "plan", "role": "planner", "interactive": True}),
            call_tool("TodoWrite", {"todos": todos}),
            "planned",
            "ok",
            call_tool("memorize", {"block_updates": [], "new_passages": []}),
        ]
    )
    monkeypatch.setenv("COLUMNS", "200")
    with LoopbackOpenAIServer(model) as server:
        chat = start_chat(server, tmp_path, "--keep-sessions")
        _out, err = chat.communicate("plan it\n/sessions\n/exit\n", timeout=40)
    assert chat.returncode == 0, err
    assert "main/planner" in err and "1 of 3 done" in err
    assert "[~] Read the [b]spec[/b]" in err  # the model's text, not markup
    assert "[ ] Write the code" in err
