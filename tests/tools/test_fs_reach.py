"""What the file tools may reach, judged when they open (``tools/builtin/reach.py``).

Real files and symlinks, tools called through the registry without a gate (these checks hold
with no policy configured too); the gate's side is in ``tests/security/test_files_*.py``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from retinue.errors import WorkspaceError
from retinue.messages import ToolCall, ToolResultMessage
from retinue.tools import ToolContext, ToolRegistry
from retinue.tools.builtin.reach import Places, Reach, opened

Call = Callable[..., Awaitable[ToolResultMessage]]


async def test_a_write_through_a_link_into_claude_is_refused_and_says_so(
    call: Call, ws: Path
) -> None:
    (ws / ".claude").mkdir()
    os.symlink(".claude", ws / "cfg")
    result = await call("Write", file_path="cfg/settings.json", content="{}")
    assert result.is_error
    assert "cfg/settings.json leads through a symbolic link to .claude/settings.json" in (
        result.content
    )
    assert not (ws / ".claude" / "settings.json").exists()


async def test_an_edit_through_a_link_to_mcp_json_leaves_it_unchanged(call: Call, ws: Path) -> None:
    (ws / ".mcp.json").write_text('{"mcpServers": {}}')
    os.symlink(".mcp.json", ws / "servers.json")
    result = await call(
        "Edit", file_path="servers.json", old_string="{}", new_string='{"x": {"command": "sh"}}'
    )
    assert result.is_error and "symbolic link" in result.content
    assert (ws / ".mcp.json").read_text() == '{"mcpServers": {}}'


async def test_claude_named_as_it_is_is_written_without_a_gate(call: Call, ws: Path) -> None:
    """The tool refuses only a path that leads there unnamed: naming it is the gate's to ask."""
    result = await call("Write", file_path=".claude/notes.md", content="hi")
    assert not result.is_error, result.content
    assert (ws / ".claude" / "notes.md").read_text() == "hi"


async def test_a_link_into_a_hidden_folder_reads_nothing(
    call: Call, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(ws))
    (ws / ".ssh").mkdir()
    (ws / ".ssh" / "id_rsa").write_text("KEY\n")
    os.symlink(".ssh", ws / "keys")
    for path in ("keys/id_rsa", ".SSH/id_rsa", "~/.ssh/id_rsa"):
        result = await call("Read", file_path=path)
        assert result.is_error and "KEY" not in result.content, path
    written = await call("Write", file_path="keys/id_rsa.pub", content="x")
    assert written.is_error and "hidden from the file tools" in written.content
    assert sorted(os.listdir(ws / ".ssh")) == ["id_rsa"]


async def test_a_workspace_inside_a_hidden_folder_is_not_hidden(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, registry: ToolRegistry
) -> None:
    """The sandbox mounts the workspace over what hides it; the file tools see it too."""
    monkeypatch.setenv("HOME", str(tmp_path))
    ws = tmp_path / ".config" / "project"
    ws.mkdir(parents=True)
    (ws / "a.txt").write_text("visible\n")
    ctx = ToolContext("a", ws, ws)  # (a data directory that holds the workspace: nothing hid)
    for name, args in (("Read", {"file_path": "a.txt"}), ("LS", {}), ("Glob", {"pattern": "*"})):
        result = await registry.execute(ToolCall("c", name, json.dumps(args)), ctx)
        assert not result.is_error and ("visible" in result.content or "a.txt" in result.content)
    wrote = await registry.execute(
        ToolCall("c", "Write", json.dumps({"file_path": "b.txt", "content": "x"})), ctx
    )
    assert not wrote.is_error, wrote.content


def test_the_folder_really_opened_is_named_after_a_rename(ws: Path) -> None:
    (ws / "d").mkdir()
    fd = os.open(ws / "d", os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.rename(ws / "d", ws / "e")
        where = opened(fd, "x.txt", ws / "d" / "x.txt")
    finally:
        os.close(fd)
    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("no /proc: the path resolved before the open is all there is")
    assert where == os.path.join(os.path.realpath(ws), "e", "x.txt")


def test_protected_places_are_the_workspaces_and_homes_top_and_the_data_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = tmp_path / "ws"
    monkeypatch.setenv("HOME", str(ws / "u"))
    places = Places.of(ToolContext("a", ws, ws / "data"))
    yes = [".claude/x", ".MCP.json", ".git/hooks/pre-commit", "u/.claude/settings.json",
           "u/.retinue/config.toml", "data/config.toml"]  # fmt: skip
    no = ["src/.claude/x", "u/src/.git/config", "claude/x", "database.txt", "u"]
    assert all(places.protected(str(ws / p)) for p in yes)
    assert not any(places.protected(str(ws / p)) for p in no)
    assert places.protected(str(ws / "data"))


async def test_a_worktree_inside_the_data_directory_is_an_ordinary_workspace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, registry: ToolRegistry
) -> None:
    """A role with ``isolation: worktree`` works in ``<data dir>/worktrees/…``: the data
    directory holds that workspace, so it hides and protects nothing there."""
    monkeypatch.setenv("HOME", str(tmp_path))
    data = tmp_path / ".retinue"
    ws = data / "worktrees" / "w1"
    ws.mkdir(parents=True)
    ctx = ToolContext("a", ws, data)
    wrote = await registry.execute(
        ToolCall("c", "Write", json.dumps({"file_path": "a.txt", "content": "x"})), ctx
    )
    read = await registry.execute(ToolCall("c", "Read", json.dumps({"file_path": "a.txt"})), ctx)
    assert not wrote.is_error and not read.is_error, (wrote.content, read.content)
    places = Places.of(ctx)
    assert not places.protected(str(ws / "a.txt")) and places.protected(str(ws / ".git/x"))


def test_a_folder_moved_out_of_the_workspace_while_opened_is_refused(
    ctx: ToolContext, outside: Path
) -> None:
    reach = Reach.of(ctx, "Write", "d/a.txt", edit=True)
    with pytest.raises(WorkspaceError, match="no longer lies inside the workspace"):
        reach.check(str(outside / "d" / "a.txt"))
