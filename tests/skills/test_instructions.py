"""CLAUDE.md / AGENTS.md: which files, in what order, ``@path`` imports and their bounds."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from retinue.engine.instructions import (
    MAX_FILE_CHARS,
    MAX_IMPORT_DEPTH,
    MAX_TOTAL_CHARS,
    load_instructions,
)


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    ws, home = tmp_path / "ws", tmp_path / "me"
    (ws / ".claude").mkdir(parents=True)
    (home / ".claude").mkdir(parents=True)
    return ws, home


def test_files_are_read_in_order_and_a_linked_one_once(dirs: tuple[Path, Path]) -> None:
    ws, home = dirs
    (home / ".claude" / "CLAUDE.md").write_text("USER rules")
    (ws / "AGENTS.md").write_text("AGENTS rules")
    (ws / "CLAUDE.md").symlink_to(ws / "AGENTS.md")  # a common layout: one file, two names
    (ws / ".claude" / "CLAUDE.md").write_text("DOT-CLAUDE rules")
    got = load_instructions(ws, home)
    text = got.text
    assert text.index("USER") < text.index("AGENTS") < text.index("DOT-CLAUDE")
    assert text.count("AGENTS rules") == 1 and got.problems == []
    assert "## Project instructions" in got.section()
    assert load_instructions(ws / "none", home / "none").section() == ""


def test_imports_nest_relative_and_home_and_ignore_code_and_mentions(
    dirs: tuple[Path, Path],
) -> None:
    ws, home = dirs
    (ws / "docs").mkdir()
    (ws / "CLAUDE.md").write_text(
        "See @docs/style.md and @~/.claude/mine.md. Mail a@b.com, ask @alice.\n"
        "`@docs/code.md` is code\n```\n@docs/fenced.md\n```\n"
    )
    (ws / "docs" / "style.md").write_text("STYLE, and @deeper.md")
    (ws / "docs" / "deeper.md").write_text("DEEPER")
    (ws / "docs" / "code.md").write_text("CODE")
    (ws / "docs" / "fenced.md").write_text("FENCED")
    (home / ".claude" / "mine.md").write_text("MINE")
    got = load_instructions(ws, home)
    assert "STYLE" in got.text and "DEEPER" in got.text
    assert "CODE" not in got.text and "FENCED" not in got.text
    assert "MINE" not in got.text  # a project file stays inside the workspace
    assert any("mine.md: outside" in p for p in got.problems)


def test_cycles_depth_and_escapes_are_refused_and_reported(dirs: tuple[Path, Path]) -> None:
    ws, home = dirs
    (ws / "CLAUDE.md").write_text("top @a.md @../secret.md @/etc/hostname")
    (ws / "a.md").write_text("A @b.md")
    (ws / "b.md").write_text("B @a.md")  # back to a: a cycle
    (ws.parent / "secret.md").write_text("SECRET")
    chain = [ws / f"d{i}.md" for i in range(MAX_IMPORT_DEPTH + 2)]
    (ws / "AGENTS.md").write_text("@d0.md")
    for i, path in enumerate(chain):
        path.write_text(f"LEVEL{i} @d{i + 1}.md")
    got = load_instructions(ws, home)
    assert "A @b.md" in got.text and "B @a.md" in got.text and "SECRET" not in got.text
    assert any("cycle refused (CLAUDE.md -> a.md -> b.md -> a.md)" in p for p in got.problems)
    assert sum("outside" in p for p in got.problems) == 2  # ../secret.md and /etc/hostname
    assert f"LEVEL{MAX_IMPORT_DEPTH - 1}" in got.text and f"LEVEL{MAX_IMPORT_DEPTH}" not in got.text
    assert any("nest at most 5 deep" in p for p in got.problems)


def test_size_is_bounded_and_a_cut_file_is_reported(dirs: tuple[Path, Path]) -> None:
    ws, home = dirs
    (ws / "CLAUDE.md").write_text("x" * (MAX_FILE_CHARS + 10))
    (ws / "AGENTS.md").write_text("y" * MAX_FILE_CHARS)
    (home / ".claude" / "CLAUDE.md").write_text("z" * MAX_FILE_CHARS)
    got = load_instructions(ws, home)
    assert len(got.text) < MAX_TOTAL_CHARS + 500
    assert any("CLAUDE.md: cut to its first" in p for p in got.problems)
    assert any("AGENTS.md: left out" in p for p in got.problems)


def test_only_regular_files_are_read(dirs: tuple[Path, Path]) -> None:
    ws, home = dirs
    os.mkfifo(ws / "CLAUDE.md")  # would block a plain open
    (ws / "AGENTS.md").symlink_to("/dev/zero")
    got = load_instructions(ws, home)
    assert got.text == ""
    assert len(got.problems) == 2  # the FIFO, and /dev/zero (outside, or not regular)
