"""Grep on ripgrep's ``rg``: where the program comes from, and the guarantees of the Python
search it replaced (symlinks, FIFOs, hard links, untrusted patterns, bounded output)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from retinue.messages import ToolResultMessage
from retinue.tools.builtin import _ripgrep, search

Call = Callable[..., Awaitable[ToolResultMessage]]


def test_rg_comes_from_the_installed_wheel() -> None:
    rg = _ripgrep.rg_binary()
    assert rg is not None
    assert Path(rg).name in ("rg", "rg.exe")
    assert Path(rg).is_relative_to(Path(sys.prefix).resolve())


async def test_an_rg_planted_on_path_in_the_workspace_is_never_started(
    call: Call, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = ws / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    fake = bin_dir / "rg"
    fake.write_text(f"#!/bin/sh\ntouch {ws / 'pwned'}\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    _ripgrep.rg_binary.cache_clear()
    (ws / "a.txt").write_text("needle\n")
    result = await call("Grep", pattern="needle")
    assert result.content.splitlines() == ["Found 1 files", "a.txt"]
    assert not (ws / "pwned").exists()


async def test_a_pattern_that_looks_like_a_flag_is_searched_for(call: Call, ws: Path) -> None:
    (ws / "a.txt").write_text("run with --files here\n")
    (ws / "b.txt").write_text("nothing\n")
    result = await call("Grep", pattern="--files", output_mode="content")
    assert result.content.splitlines() == ["a.txt:1:run with --files here"]


async def test_a_fifo_given_as_the_path_is_refused_at_once(call: Call, ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    result = await asyncio.wait_for(call("Grep", pattern="x", path="pipe"), 30)
    assert result.is_error
    assert "FIFO" in result.content


async def test_a_symlinked_file_is_searched_as_its_checked_target(
    call: Call, ws: Path, outside: Path
) -> None:
    """The path is resolved and checked first (``locate``); rg never sees the link."""
    (ws / "real.txt").write_text("needle\n")
    (ws / "link.txt").symlink_to("real.txt")
    (ws / "out.txt").symlink_to(outside / "secret.txt")
    result = await call("Grep", pattern="needle", path="link.txt", output_mode="content")
    assert result.content == "real.txt:1:needle"
    escape = await call("Grep", pattern="secret", path="out.txt", output_mode="content")
    assert escape.is_error and "top secret" not in escape.content


async def test_a_hard_linked_file_is_skipped_and_counted(
    call: Call, ws: Path, outside: Path
) -> None:
    os.link(outside / "secret.txt", ws / "hl.txt")
    (ws / "mine.txt").write_text("a secret of mine\n")
    result = await call("Grep", pattern="secret", output_mode="content")
    lines = result.content.splitlines()
    assert lines[0] == "mine.txt:1:a secret of mine"
    assert "top secret" not in result.content
    assert lines[-1] == "(1 non-regular or hard-linked files were skipped)"
    single = await call("Grep", pattern="secret", path="hl.txt")
    assert single.is_error and "hard links" in single.content


@pytest.mark.parametrize("mode", ["content", "count", "files_with_matches"])
async def test_a_hard_link_named_like_stdin_is_skipped_too(
    call: Call, ws: Path, outside: Path, mode: str
) -> None:
    """``<stdin>`` is what rg calls the one file it reads on stdin; in a folder search a file
    of that name is any other file, checked as they all are."""
    os.link(outside / "secret.txt", ws / "<stdin>")
    result = await call("Grep", pattern="secret", output_mode=mode)
    assert "top secret" not in result.content and ":1" not in result.content


async def test_a_name_holding_a_newline_is_counted_under_its_own_name(call: Call, ws: Path) -> None:
    (ws / "x\nok.txt").write_text("hit\nhit\nhit\n")
    (ws / "ok.txt").write_text("nothing here\n")
    result = await call("Grep", pattern="hit", output_mode="count")
    assert result.content.splitlines()[:2] == ["x", "ok.txt:3"]  # one entry: "x\nok.txt:3"
    assert "ok.txt:0" not in result.content


async def test_gitignored_and_dependency_folders_are_skipped(call: Call, ws: Path) -> None:
    (ws / ".gitignore").write_text("build/\n")
    for rel in ("build/out.txt", "node_modules/m/x.txt", "src/y.txt", ".hidden/z.txt"):
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text("needle\n")
    result = await call("Grep", pattern="needle", output_mode="count")
    assert result.content.splitlines() == [".hidden/z.txt:1", "src/y.txt:1"]


async def test_content_follows_the_folder_order_and_keeps_other_bytes(call: Call, ws: Path) -> None:
    (ws / "b").mkdir()
    (ws / "b" / "x.txt").write_bytes(b"needle b\n")
    (ws / "z.txt").write_bytes(b"caf\xe9 needle\r\n")
    (ws / "a.txt").write_bytes(b"needle a\n")
    result = await call("Grep", pattern="needle", output_mode="content")
    assert result.content.splitlines() == [
        "a.txt:1:needle a",
        "z.txt:1:caf\ufffd needle",
        "b/x.txt:1:needle b",
    ]


async def test_a_multiline_match_marks_every_line_it_spans(call: Call, ws: Path) -> None:
    (ws / "m.py").write_text("a = 1\ndef f(\n    x,\n):\n    pass\n")
    result = await call(
        "Grep", pattern=r"def f\(\n\s+x", output_mode="content", multiline=True, **{"-A": 1}
    )
    assert result.content.splitlines() == ["m.py:2:def f(", "m.py:3:    x,", "m.py-4-):"]


async def test_unknown_type_names_and_regex_errors_say_so(call: Call, ws: Path) -> None:
    (ws / "a.txt").write_text("x\n")
    bad_type = await call("Grep", pattern="x", type="py:include:*")
    assert bad_type.is_error and "unknown file type" in bad_type.content
    lookahead = await call("Grep", pattern="a(?=b)")
    assert lookahead.is_error
    assert "invalid regular expression" in lookahead.content
    assert "look-around" in lookahead.content


async def test_output_past_the_cap_is_cut_and_said(
    call: Call, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search, "OUTPUT_CAP", 4096)
    (ws / "many.txt").write_text("needle\n" * 5000)
    result = await call("Grep", pattern="needle", output_mode="content", head_limit=3)
    lines = result.content.splitlines()
    assert lines[:3] == ["many.txt:1:needle", "many.txt:2:needle", "many.txt:3:needle"]
    assert "Grep stopped after" in result.content


def _wall_or_skip(ws: Path) -> tuple[list[str], int]:
    rg = _ripgrep.rg_binary()
    assert rg is not None
    fd = os.open(ws, os.O_RDONLY | os.O_DIRECTORY)
    argv = _ripgrep.walled([rg, "--no-config", "--follow", "-e", "secret", "."], fd, str(ws))
    if argv is None:
        os.close(fd)
        pytest.skip("bubblewrap cannot make a user namespace here")
    return argv, fd


def test_walled_rg_sees_nothing_outside_even_when_told_to_follow(ws: Path, outside: Path) -> None:
    (ws / "mine.txt").write_text("a secret of mine\n")
    (ws / "out").symlink_to(outside)
    (ws / "out.txt").symlink_to(outside / "secret.txt")
    argv, fd = _wall_or_skip(ws)
    try:
        done = subprocess.run(argv, pass_fds=(fd,), capture_output=True, env={}, check=False)
    finally:
        os.close(fd)
    assert done.stdout.decode().splitlines() == ["./mine.txt:a secret of mine"]
    assert b"top secret" not in done.stdout
