"""The small-model prompt: workspace overview, named files inlined, bounded."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from retinue.config import Settings
from retinue.engine.small_model_prompt import (
    small_model_main_prompt,
    with_named_files,
    with_role_choices,
    workspace_overview,
)
from retinue.runtime import Runtime
from retinue.subagents.tools import subagent_tools
from retinue.testing import ScriptedModel
from retinue.tools.base import ToolRegistry
from retinue.tools.builtin import builtin_tools


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "pricing.py").write_text("def f():\n    return 1\n")
    (ws / "notes.txt").write_text("hello\n")
    (ws / "src").mkdir()
    (ws / "src" / "app.py").write_text("APP = 1\n")
    (ws / ".git").mkdir()
    return ws


def test_overview_lists_top_level_entries_sorted_without_hidden_ones(workspace: Path) -> None:
    assert workspace_overview(workspace) == "Files in the folder: notes.txt, pricing.py, src/."


def test_overview_is_bounded(tmp_path: Path) -> None:
    for i in range(50):
        (tmp_path / f"f{i:02d}.txt").write_text("")
    line = workspace_overview(tmp_path, limit=5)
    assert line.endswith("f04.txt and 45 more.")


def test_prompt_names_roles_by_first_sentence(workspace: Path) -> None:
    prompt = small_model_main_prompt(workspace, [("code-reviewer", "Reviews code. Long detail.")])
    assert "- code-reviewer: Reviews code." in prompt and "Long detail" not in prompt
    assert "pricing.py" in prompt


def test_named_files_are_appended_with_their_content(workspace: Path) -> None:
    out = with_named_files("Add a docstring to f in pricing.py and src/app.py", workspace)
    assert out.startswith("Add a docstring to f in pricing.py and src/app.py\n\n")
    assert "Current content of pricing.py:\n```\ndef f():\n    return 1\n```" in out
    assert "Current content of src/app.py:\n```\nAPP = 1\n```" in out


def test_unnamed_missing_large_and_binary_files_are_left_out(workspace: Path) -> None:
    (workspace / "big.txt").write_text("x" * 5000)
    (workspace / "blob.bin").write_bytes(b"\x00\x01")
    text = "look at big.txt, blob.bin and missing.py"
    assert with_named_files(text, workspace) == text


def test_paths_outside_the_workspace_are_never_read(workspace: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET")
    os.symlink(secret, workspace / "link.txt")
    for text in ("read ../secret.txt", "read link.txt", f"read {secret}", "read /etc/hostname"):
        assert "TOPSECRET" not in with_named_files(text, workspace)
        assert "Current content" not in with_named_files(text, workspace)


def test_at_most_a_few_files_are_inlined(workspace: Path) -> None:
    for i in range(6):
        (workspace / f"m{i}.py").write_text(f"V = {i}\n")
    out = with_named_files(" ".join(f"m{i}.py" for i in range(6)), workspace, max_files=2)
    assert out.count("Current content of") == 2


def test_many_roles_do_not_inflate_the_prompt(workspace: Path) -> None:
    roles = [(f"role{i}", "Does things.") for i in range(60)]
    prompt = small_model_main_prompt(workspace, roles)
    assert "- role19: Does things." in prompt and "role20:" not in prompt
    assert "- and 40 more roles" in prompt


def test_role_parameters_list_the_roles_as_their_only_choices() -> None:
    tools = ToolRegistry([*subagent_tools(), *builtin_tools()])
    narrowed = with_role_choices(tools, ["code-reviewer", "researcher"])
    assert narrowed.names == tools.names
    for name in ("SubAgent", "UnloadSubAgent"):
        spec = narrowed.get(name)
        assert spec is not None
        assert spec.spec.parameters["properties"]["role"]["enum"] == ["code-reviewer", "researcher"]
        original = tools.get(name)
        assert original is not None and "enum" not in original.spec.parameters["properties"]["role"]
    read = narrowed.get("Read")
    assert read is not None and read is tools.get("Read")


async def test_a_small_models_main_agent_gets_the_small_model_prompt_and_tools(
    workspace: Path, tmp_path: Path
) -> None:
    model = ScriptedModel(["hi"], name="local:tiny")  # local: models have a small-model profile
    settings = Settings.load(workspace=workspace, home=tmp_path / "home")
    conversation = Runtime.create(settings, model=model).conversation()
    await conversation.send("What is in pricing.py?")
    [call] = model.calls
    assert sorted(call.tool_names) == sorted(
        ["Read", "Write", "Edit", "Glob", "Grep", "Bash", "SubAgent", "UnloadSubAgent"]
    )
    system, user = call.messages[0], call.messages[1]
    assert "Files in the folder: notes.txt, pricing.py, src/." in system.content
    assert "core_memory" not in system.content
    assert "Current content of pricing.py:" in user.content
