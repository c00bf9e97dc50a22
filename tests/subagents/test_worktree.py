"""``isolation: worktree`` (issue 27 item 7): a sub-agent works in a git worktree of the
workspace (real git), removed when its session ends unless it has changes, then reported."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from subagent_kit import Kit, RecordingMemory

from retinue.events import NOTICE, Event
from retinue.messages import SystemMessage
from retinue.subagents import RoleCatalog, SubAgentManager, parse_role
from retinue.testing import ScriptedModel, call_tool
from retinue.tools import ToolContext, ToolRegistry
from retinue.tools.builtin import builtin_tools

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(cwd), *args], capture_output=True, text=True, check=True
    ).stdout


def exists(path: str) -> bool:
    return Path(path).exists()


def repo(path: Path) -> Path:
    path.mkdir()
    git(path, "init", "-q")
    (path / "README.md").write_text("hello\n")
    git(path, "add", "README.md")
    git(path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first")
    hook = path / ".git" / "hooks" / "post-checkout"
    hook.write_text(f"#!/bin/sh\ntouch {path.parent / 'HOOK-RAN'}\n")
    hook.chmod(0o755)
    return path


def setup(tmp_path: Path, workspace: Path) -> tuple[Kit, ScriptedModel, list[Event]]:
    model = ScriptedModel(name="scripted:iso")
    text = "---\nname: iso\ndescription: d\ntools: Write, Read\nisolation: worktree\n---\np"
    role = parse_role(tmp_path / "iso.md", text)
    manager = SubAgentManager(
        RoleCatalog.of(role), ToolRegistry(builtin_tools()), default_model=model
    )
    events: list[Event] = []
    kit = Kit(manager, {}, RecordingMemory(), workspace)
    return kit, model, events


def ctx(kit: Kit, tmp_path: Path, events: list[Event]) -> ToolContext:
    return ToolContext("main", kit.workspace, tmp_path / "data", role="main",
                       call_chain=("main",), manager=kit.manager, events=events.append)  # fmt: skip


async def test_a_worktree_without_changes_is_removed(tmp_path: Path) -> None:
    ws = repo(tmp_path / "ws")
    kit, model, events = setup(tmp_path, ws)
    model.add("nothing to do")
    await kit.manager.delegate(ctx(kit, tmp_path, events), task="look", role="iso")
    prompt = next(m.content for m in model.calls[0].messages if isinstance(m, SystemMessage))
    where = prompt.split("Your workspace is ")[1].split(", a git worktree of ")[0]
    assert Path(where).parent == tmp_path / "data" / "worktrees"
    assert not exists(where)  # removed at the session's end
    assert "worktrees" not in git(ws, "worktree", "list")
    assert not (tmp_path / "HOOK-RAN").exists()  # the repository's hooks never run
    assert [e for e in events if e.kind == NOTICE] == []


async def test_a_worktree_with_changes_is_kept_and_reported(tmp_path: Path) -> None:
    ws = repo(tmp_path / "ws")
    kit, model, events = setup(tmp_path, ws)
    model.add(call_tool("Write", {"file_path": "new.txt", "content": "made"}), "wrote it")
    await kit.manager.delegate(ctx(kit, tmp_path, events), task="write", role="iso")
    assert not (ws / "new.txt").exists()  # the workspace itself is untouched
    notes = [e.data["text"] for e in events if e.kind == NOTICE]
    assert len(notes) == 1 and "kept with 1 changed file(s): new.txt" in notes[0]
    kept = Path(notes[0].split("worktree ")[1].split(" kept")[0])
    assert (kept / "new.txt").read_text() == "made"


async def test_no_repository_means_no_worktree_and_a_notice(tmp_path: Path) -> None:
    ws = tmp_path / "plain"
    ws.mkdir()
    kit, model, events = setup(tmp_path, ws)
    model.add("done")
    await kit.manager.delegate(ctx(kit, tmp_path, events), task="look", role="iso")
    notes = [e.data["text"] for e in events if e.kind == NOTICE]
    assert len(notes) == 1 and "not a git repository" in notes[0] and "works in place" in notes[0]
