"""``retinue roles`` as a user runs it (a real process): what a role's run gets is what the
listing says, and Markdown files that are not agents are counted in one line, not listed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(60)


def retinue_roles(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RETINUE_"))}
    env |= {"RETINUE_HOME": str(tmp_path / "home"), "HOME": str(tmp_path / "me")}
    env |= {"COLUMNS": "300", "RETINUE_BLOCK_REAL_MODELS": "1"}
    return subprocess.run(
        [sys.executable, "-m", "retinue", "roles", "--workspace", str(tmp_path), *args],
        env=env, capture_output=True, text=True, timeout=50,
    )  # fmt: skip


def test_a_role_that_preloads_skills_is_listed_with_skill_not_warned_about(
    tmp_path: Path,
) -> None:
    agents = tmp_path / ".claude" / "agents"
    agents.mkdir(parents=True)
    (agents / "writer.md").write_text(
        "---\nname: writer\ndescription: Writes.\ntools: Read, Skill\nskills: [notes]\n---\nW"
    )
    (agents / "reader.md").write_text(
        "---\nname: reader\ndescription: Reads.\ntools: Read\nskills: [notes]\n---\nR"
    )
    (agents / "plain.md").write_text("---\nname: plain\ndescription: P.\ntools: Read, Skill\n---\n")
    proc = retinue_roles(tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = {line.split()[1]: line for line in proc.stdout.splitlines() if line.startswith("│")}
    assert "│ Read, Skill " in rows["writer"]
    assert "│ Read + Skill (its preloaded skills) " in rows["reader"]
    warned = [line for line in proc.stderr.splitlines() if "left out" in line]
    assert not any("writer.md" in line for line in warned)  # its run gets Skill
    assert any("plain.md" in line and "[Skill]" in line for line in warned)  # this one's not


def test_markdown_files_without_front_matter_are_one_line_unless_verbose(tmp_path: Path) -> None:
    agents = tmp_path / ".claude" / "agents"
    agents.mkdir(parents=True)
    for name in ("README.md", "CONTRIBUTING.md", "notes.md"):
        (agents / name).write_text(f"# {name}\n\nNot an agent.\n")
    (agents / "broken.md").write_text("---\nname: broken\n---\nno description")
    proc = retinue_roles(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "3 Markdown files without front matter skipped; --verbose lists them" in proc.stderr
    assert "README.md" not in proc.stderr and "notes.md" not in proc.stderr
    assert "broken.md" in proc.stderr and "'description' is required" in proc.stderr
    verbose = retinue_roles(tmp_path, "--verbose")
    assert verbose.returncode == 0, verbose.stderr
    for name in ("README.md", "CONTRIBUTING.md", "notes.md", "broken.md"):
        assert name in verbose.stderr
    assert "--verbose lists them" not in verbose.stderr
