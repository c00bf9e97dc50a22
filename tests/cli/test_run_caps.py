"""``retinue run`` with the fan-out caps: a real process against a loopback OpenAI-compatible
server that replays a scripted model (the main agent, its sub-agents and consolidation)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.messages import ToolResultMessage
from retinue.testing import ScriptedModel, call_tool

pytestmark = pytest.mark.timeout(60)

EXIT_INCOMPLETE = 2


def retinue_run(task: str, server: LoopbackOpenAIServer, tmp_path: Path, config: str):
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text(config)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RETINUE_"))}
    env |= {"RETINUE_HOME": str(home), "RETINUE_BLOCK_REAL_MODELS": "1"}
    env |= {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "test-key"}
    return subprocess.run(
        [sys.executable, "-m", "retinue", "run", "-m", "openai:test", task],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=50,
    )


def delegate(task: str):
    return call_tool("SubAgent", {"task": task, "role": "researcher"})


def test_a_run_that_keeps_delegating_stops_at_the_cap(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            delegate("look at a.py"),
            "a.py loads the config.",  # the researcher
            call_tool("memorize", {"block_updates": [], "new_passages": []}),  # its memory
            *(delegate(f"look at {name}") for name in ("b.py", "c.py", "d.py", "e.py")),
        ]
    )
    with LoopbackOpenAIServer(model) as server:
        proc = retinue_run("map the code", server, tmp_path, "max_subagents_per_run = 1\n")
    assert proc.returncode == EXIT_INCOMPLETE, proc.stderr
    assert proc.stdout == ""
    assert "Stopped: the agent kept starting sub-agents after reaching the limit" in proc.stderr
    assert "max_subagents_per_run=1" in proc.stderr
    assert "limit reached: subagents_per_run=1" in proc.stderr  # the progress line
    assert model.remaining == 1  # stopped: the fourth refused delegation was never asked
    refused = [m for m in model.calls[-1].messages if isinstance(m, ToolResultMessage)][1:]
    assert len(refused) == 2
    assert all("this run has started 1 sub-agent sessions" in r.content for r in refused)


def test_the_same_task_delegated_again_and_again_stops_the_run(tmp_path: Path) -> None:
    same = delegate("look at a.py")
    model = ScriptedModel(
        [
            *(
                step
                for answer in ("It loads the config.", "It still loads the config.")
                for step in (
                    same,
                    answer,
                    call_tool("memorize", {"block_updates": [], "new_passages": []}),
                )
            ),
            same,  # the third time: a note, not run
            same,  # the fourth: the run stops
            "never asked",
        ]
    )
    with LoopbackOpenAIServer(model) as server:
        proc = retinue_run("map the code", server, tmp_path, "")
    assert proc.returncode == EXIT_INCOMPLETE, proc.stderr
    assert "delegated the same task to 'researcher' 4 times in a row" in proc.stderr
    assert "limit reached: repeated_delegation=3: the turn stops" in proc.stderr
    assert model.remaining == 1
    note = [m for m in model.calls[-1].messages if isinstance(m, ToolResultMessage)][-1]
    assert note.content.startswith("Not run: you delegated this same task to 'researcher' 3")
