"""``retinue run`` as a user runs it: a real process against a loopback OpenAI-compatible server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.testing import ScriptedModel, call_tool

pytestmark = pytest.mark.timeout(60)


def retinue(args: list[str], server: LoopbackOpenAIServer | None, tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RETINUE_"))}
    env["RETINUE_HOME"] = str(tmp_path / "home")
    env["RETINUE_BLOCK_REAL_MODELS"] = "1"
    if server is not None:
        env["OPENAI_BASE_URL"] = server.base_url
        env["OPENAI_API_KEY"] = "test-key"
    return subprocess.run(
        [sys.executable, "-m", "retinue", *args],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=50,
    )


def memorize(*passages: str):
    return call_tool("memorize", {"block_updates": [], "new_passages": list(passages)})


def test_run_prints_only_the_answer_and_shows_progress_on_stderr(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("the answer is 42\n")
    model = ScriptedModel([call_tool("Read", {"file_path": "notes.txt"}), "It is 42."])
    with LoopbackOpenAIServer(model) as server:
        proc = retinue(["run", "--model", "openai:test", "what is the answer?"], server, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "It is 42.\n"
    assert "Read" in proc.stderr
    tool_result = model.calls[1].messages[-1]
    assert "the answer is 42" in tool_result.content


def test_parent_holds_an_interactive_session_across_two_turns_and_unloads_it(
    tmp_path: Path,
) -> None:
    session = {"role": "researcher", "interactive": True}
    model = ScriptedModel(
        [
            call_tool("SubAgent", {"task": "find the config loader", **session}),
            "It is in config.py.",  # the researcher's first turn
            call_tool("SubAgent", {"task": "and who calls it?", **session}),
            "cli/app.py calls it.",  # its second turn, with the whole history
            call_tool("UnloadSubAgent", {"role": "researcher"}),
            memorize("config.py holds the config loader; cli/app.py calls it"),
            "config.py, called from cli/app.py.",
        ]
    )
    with LoopbackOpenAIServer(model) as server:
        proc = retinue(
            ["run", "-m", "openai:test", "where is the config loaded?"], server, tmp_path
        )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "config.py, called from cli/app.py.\n"
    second_turn = model.calls[3].messages
    assert [m.content for m in second_turn if m.role == "user"] == [
        "find the config loader",
        "and who calls it?",
    ]
    assert "session main/researcher created" in proc.stderr
    assert "session main/researcher unloaded" in proc.stderr
    unload_result = model.calls[6].messages[-1]
    assert "ended after 2 turn(s)" in unload_result.content
    model.assert_done()
    # what the session taught the researcher is in its memory for the next process
    show = retinue(["memory", "search", "researcher", "config loader"], None, tmp_path)
    assert show.returncode == 0, show.stderr
    assert "cli/app.py calls it" in show.stdout


def test_run_failures_are_one_line_with_a_nonzero_exit(tmp_path: Path) -> None:
    bad_model = retinue(["run", "--model", "gpt4", "hi"], None, tmp_path)
    assert bad_model.returncode == 1
    assert bad_model.stdout == ""
    assert "not of the form provider:model" in bad_model.stderr
    assert "Traceback" not in bad_model.stderr

    with LoopbackOpenAIServer(ScriptedModel(), fail_always=500) as server:
        down = retinue(["run", "-m", "openai:test", "hi"], server, tmp_path)
    assert down.returncode == 1 and down.stdout == ""
    assert "Traceback" not in down.stderr
    assert len([ln for ln in down.stderr.splitlines() if ln.startswith("error:")]) == 1

    missing = retinue(["run", "-m", "openai:test", "--workspace", "nope", "hi"], None, tmp_path)
    assert missing.returncode == 1 and "--workspace" in missing.stderr


def test_run_stopped_by_max_iterations_exits_2(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("max_iterations = 2\n")
    loop = [call_tool("Glob", {"pattern": "*"}), call_tool("Glob", {"pattern": "*"})]
    with LoopbackOpenAIServer(ScriptedModel(loop)) as server:
        proc = retinue(["run", "-m", "openai:test", "loop"], server, tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "max_iterations=2" in proc.stderr


def test_run_stopped_by_a_repeated_call_exits_2(tmp_path: Path) -> None:
    loop = [call_tool("Glob", {"pattern": "*.none"}) for _ in range(4)]
    with LoopbackOpenAIServer(ScriptedModel(loop)) as server:
        proc = retinue(["run", "-m", "openai:test", "loop"], server, tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "repeated_call" in proc.stderr and "Glob" in proc.stderr


def test_roles_lists_shipped_and_project_roles(tmp_path: Path) -> None:
    agents = tmp_path / ".claude" / "agents"
    agents.mkdir(parents=True)
    helper = "---\nname: helper\ndescription: Helps.\ntools: Read, Fly\n---\nH"
    (agents / "helper.md").write_text(helper)
    (agents / "broken.md").write_text("no front matter")
    proc = retinue(["roles"], None, tmp_path)
    assert proc.returncode == 0, proc.stderr
    for name in ("helper", "code-reviewer", "researcher", "tester"):
        assert name in proc.stdout
    assert "1 Markdown file without front matter skipped; --verbose lists them" in proc.stderr
    assert "tools not available here (left out): [Fly]" in proc.stderr
    assert ".claude/agents: 2 .md file(s)" in proc.stderr  # (broken.md: test_roles_view.py)
    assert "(memory)" in proc.stdout  # capabilities shown, not eaten as markup
    json.dumps(proc.stdout)  # printable


def test_an_empty_task_is_refused(tmp_path: Path) -> None:
    proc = retinue(["run", "  "], None, tmp_path)
    assert proc.returncode == 1 and "the task is empty" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_an_empty_answer_is_said_and_an_overridden_example_role_is_no_problem(
    tmp_path: Path,
) -> None:
    agents = tmp_path / ".retinue" / "agents"
    agents.mkdir(parents=True)
    (agents / "researcher.md").write_text("---\nname: researcher\ndescription: mine\n---\nHi\n")
    with LoopbackOpenAIServer(ScriptedModel([""])) as server:
        proc = retinue(["run", "--model", "openai:t", "say nothing"], server, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "(The model ended its turn without an answer.)\n"
    assert "role file(s) have problems" not in proc.stderr  # the shadowed example is a choice
