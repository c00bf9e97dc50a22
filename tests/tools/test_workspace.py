"""Every path-taking built-in refuses paths that leave the workspace."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from retinue.errors import WorkspaceError
from retinue.messages import ToolResultMessage
from retinue.tools import ToolContext
from retinue.tools.builtin import builtin_tools, resolve_in_workspace

Call = Callable[..., Awaitable[ToolResultMessage]]


def test_builtin_tools_are_claude_code_names() -> None:
    names = [t.name for t in builtin_tools()]
    assert names[:3] == ["Read", "Write", "Edit"] and {"Glob", "Grep", "Bash", "LS"} <= set(names)


def test_relative_and_absolute_paths_inside_resolve(ctx: ToolContext, ws: Path) -> None:
    root = Path(os.path.realpath(ws))
    assert resolve_in_workspace(ctx, "a/b.txt") == root / "a" / "b.txt"
    assert resolve_in_workspace(ctx, str(ws / "a" / ".." / "c.txt")) == root / "c.txt"
    assert resolve_in_workspace(ctx, ".") == root


@pytest.mark.parametrize("path", ["..", "../outside/secret.txt", "a/../../outside", "/etc/passwd"])
def test_escapes_raise_workspace_error(ctx: ToolContext, outside: Path, path: str) -> None:
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        resolve_in_workspace(ctx, path)


def test_symlinks_out_are_refused_even_dangling(ctx: ToolContext, ws: Path, outside: Path) -> None:
    (ws / "dir_link").symlink_to(outside)
    (ws / "dangling").symlink_to(outside / "not-yet.txt")
    (ws / "inner").mkdir()
    (ws / "ok_link").symlink_to(ws / "inner")
    for path in ("dir_link/secret.txt", "dir_link", "dangling"):
        with pytest.raises(WorkspaceError):
            resolve_in_workspace(ctx, path)
    assert resolve_in_workspace(ctx, "ok_link/x") == Path(os.path.realpath(ws)) / "inner" / "x"


def _escapes(outside: Path) -> list[str]:
    return ["../outside/secret.txt", str(outside / "secret.txt"), "link/secret.txt", "file_link"]


CASES = [
    ("Read", lambda p: {"file_path": p}),
    ("Write", lambda p: {"file_path": p, "content": "pwned"}),
    ("Edit", lambda p: {"file_path": p, "old_string": "top", "new_string": "pwned"}),
    ("Glob", lambda p: {"pattern": "*", "path": p}),
    ("Grep", lambda p: {"pattern": "secret", "path": p}),
]


@pytest.mark.parametrize(("name", "args"), CASES, ids=[c[0] for c in CASES])
async def test_every_path_tool_refuses_escapes(
    call: Call, ws: Path, outside: Path, name: str, args
) -> None:
    (ws / "link").symlink_to(outside)
    (ws / "file_link").symlink_to(outside / "secret.txt")
    for path in _escapes(outside):
        result = await call(name, **args(path))
        assert result.is_error, (name, path, result.content)
        assert "outside the workspace" in result.content
    assert (outside / "secret.txt").read_text() == "top secret\n"
    assert sorted(os.listdir(outside)) == ["secret.txt"]


async def test_write_through_dangling_symlink_creates_nothing_outside(
    call: Call, ws: Path, outside: Path
) -> None:
    (ws / "dangling").symlink_to(outside / "new.txt")
    result = await call("Write", file_path="dangling", content="x")
    assert result.is_error
    assert not (outside / "new.txt").exists()


async def test_glob_and_grep_skip_symlinks_leading_out(call: Call, ws: Path, outside: Path) -> None:
    (ws / "link.txt").symlink_to(outside / "secret.txt")
    (ws / "dir_link").symlink_to(outside)
    (ws / "mine.txt").write_text("not a secret\n")
    glob = await call("Glob", pattern="**/*.txt")
    assert glob.content.splitlines() == ["mine.txt"]
    grep = await call("Grep", pattern="secret")
    assert grep.content.splitlines() == ["Found 1 files", "mine.txt"]


async def test_glob_pattern_with_dotdot_finds_nothing_outside(call: Call, outside: Path) -> None:
    result = await call("Glob", pattern="../outside/*.txt")
    assert result.is_error
    assert "may not contain '..'" in result.content
    assert "secret" not in result.content
