"""Glob and Grep through the registry."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from retinue.messages import ToolResultMessage
from retinue.tools.builtin.search import GLOB_LIMIT, expand_braces

Call = Callable[..., Awaitable[ToolResultMessage]]


def _touch(path: Path, text: str = "", mtime: float | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if mtime is not None:
        os.utime(path, (mtime, mtime))


def test_expand_braces() -> None:
    assert expand_braces("*.{ts,tsx}") == ["*.ts", "*.tsx"]
    assert expand_braces("{a,b}/{c,d}") == ["a/c", "a/d", "b/c", "b/d"]
    assert expand_braces("plain") == ["plain"]


async def test_glob_newest_first(call: Call, ws: Path) -> None:
    _touch(ws / "old.py", mtime=1_000_000)
    _touch(ws / "pkg/new.py", mtime=3_000_000)
    _touch(ws / "pkg/mid.py", mtime=2_000_000)
    _touch(ws / "notes.md", mtime=4_000_000)
    result = await call("Glob", pattern="**/*.py")
    assert not result.is_error
    assert result.content.splitlines() == ["pkg/new.py", "pkg/mid.py", "old.py"]


async def test_glob_path_braces_and_absolute_pattern(call: Call, ws: Path) -> None:
    _touch(ws / "src/a.ts", mtime=2)
    _touch(ws / "src/b.tsx", mtime=1)
    _touch(ws / "src/c.js")
    assert (await call("Glob", pattern="*.{ts,tsx}", path="src")).content.splitlines() == [
        "src/a.ts",
        "src/b.tsx",
    ]
    absolute = await call("Glob", pattern=str(ws / "src" / "*.js"))
    assert absolute.content.splitlines() == ["src/c.js"]


async def test_glob_caps_results_and_reports_none(call: Call, ws: Path) -> None:
    for i in range(GLOB_LIMIT + 5):
        _touch(ws / f"f{i:03}.txt")
    capped = await call("Glob", pattern="*.txt")
    lines = capped.content.splitlines()
    assert len(lines) == GLOB_LIMIT + 1
    assert f"of {GLOB_LIMIT + 5} files" in lines[-1]
    none = await call("Glob", pattern="*.nothing")
    assert not none.is_error
    assert none.content == "No files found"


async def test_glob_path_must_be_a_directory(call: Call, ws: Path) -> None:
    _touch(ws / "f.txt")
    result = await call("Glob", pattern="*", path="f.txt")
    assert result.is_error


@pytest.fixture
def tree(ws: Path) -> Path:
    _touch(ws / "a.py", "import os\ndef main():\n    return os.sep\n", mtime=1)
    _touch(ws / "b.py", "# TODO later\nprint('Hello')\n", mtime=2)
    _touch(ws / "docs/c.md", "hello world\nsay HELLO\n", mtime=3)
    _touch(ws / ".git/config", "hello from git\n")
    (ws / "img.bin").write_bytes(b"hello\x00\x01")
    return ws


async def test_grep_files_with_matches_is_the_default(call: Call, tree: Path) -> None:
    result = await call("Grep", pattern="hello")
    assert result.content.splitlines() == ["Found 1 files", "docs/c.md"]
    insensitive = await call("Grep", pattern="hello", **{"-i": True})
    assert insensitive.content.splitlines() == ["Found 2 files", "docs/c.md", "b.py"]


async def test_grep_content_with_and_without_numbers(call: Call, tree: Path) -> None:
    numbered = await call("Grep", pattern="os", output_mode="content", glob="*.py")
    assert numbered.content.splitlines() == ["a.py:1:import os", "a.py:3:    return os.sep"]
    bare = await call("Grep", pattern="os", output_mode="content", path="a.py", **{"-n": False})
    assert bare.content.splitlines() == ["a.py:import os", "a.py:    return os.sep"]


async def test_grep_count_and_type_filter(call: Call, tree: Path) -> None:
    result = await call("Grep", pattern="(?i)hello", output_mode="count")
    assert sorted(result.content.splitlines()) == ["b.py:1", "docs/c.md:2"]
    typed = await call("Grep", pattern="(?i)hello", output_mode="count", type="md")
    assert typed.content.splitlines() == ["docs/c.md:2"]


async def test_grep_context_lines(call: Call, tree: Path) -> None:
    result = await call("Grep", pattern="def", output_mode="content", **{"-C": 1})
    assert result.content.splitlines() == [
        "a.py-1-import os",
        "a.py:2:def main():",
        "a.py-3-    return os.sep",
    ]


async def test_grep_multiline(call: Call, tree: Path) -> None:
    flat = await call("Grep", pattern=r"main\(\):\n\s+return", output_mode="content")
    assert flat.is_error
    assert "set multiline to true" in flat.content
    spanning = await call(
        "Grep", pattern=r"main\(\):\n\s+return", output_mode="content", multiline=True
    )
    assert spanning.content.splitlines() == ["a.py:2:def main():", "a.py:3:    return os.sep"]


async def test_grep_head_limit(call: Call, ws: Path) -> None:
    _touch(ws / "many.txt", "hit\n" * 50)
    result = await call("Grep", pattern="hit", output_mode="content", head_limit=5)
    lines = result.content.splitlines()
    assert len(lines) == 6
    assert "5 of 50 lines" in lines[-1]


async def test_grep_errors(call: Call, tree: Path) -> None:
    bad = await call("Grep", pattern="(unclosed")
    assert bad.is_error
    assert "invalid regular expression" in bad.content
    missing = await call("Grep", pattern="x", path="nope")
    assert missing.is_error
    wrong_mode = await call("Grep", pattern="x", output_mode="lines")
    assert wrong_mode.is_error


def test_grep_schema_uses_claude_code_flag_names() -> None:
    from retinue.tools.builtin import grep_tool

    props = grep_tool.spec.parameters["properties"]
    assert {"-i", "-n", "-A", "-B", "-C", "type", "glob", "output_mode"} <= props.keys()
