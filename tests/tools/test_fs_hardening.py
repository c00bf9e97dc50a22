"""File tools under attack: races, hard links, FIFOs, huge and sparse files, slow regexes.

Real files, FIFOs, hard links and symlinks; each case is one finding of issue 14.
"""

from __future__ import annotations

import asyncio
import os
import random
import resource
import shutil
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from retinue.errors import WorkspaceError
from retinue.messages import ToolResultMessage
from retinue.tools import ToolContext
from retinue.tools.builtin import _fsafe, fs, search
from retinue.tools.builtin.fs import READ_MAX_CHARS, READ_SCAN_BYTES
from retinue.tools.builtin.workspace import locate

Call = Callable[..., Awaitable[ToolResultMessage]]


async def _ticks_while(work: Awaitable[ToolResultMessage]) -> tuple[ToolResultMessage, int]:
    """Run ``work`` while another task counts its turns on the event loop (counted, not timed)."""
    ticks = 0
    done = asyncio.Event()

    async def tick() -> None:
        nonlocal ticks
        while not done.is_set():
            await asyncio.sleep(0)
            ticks += 1

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0)  # the ticker is running before the work starts
    try:
        result = await work
        served = ticks
    finally:
        done.set()
        await ticker
    return result, served


def _bytes_read() -> int:
    """Bytes this process has read so far, by the kernel's count (``rchar``), whatever the
    machine's speed: how a test tells that a file was not read, without a clock."""
    io = Path("/proc/self/io")
    if not io.exists():
        pytest.skip("needs Linux's /proc/self/io to count the bytes read")
    fields = dict(line.split(": ") for line in io.read_text().splitlines())
    return int(fields["rchar"])


# -- races: the check and the open cannot be split --------------------------------------


def test_a_folder_swapped_for_a_symlink_after_the_check_is_refused(
    ctx: ToolContext, ws: Path, outside: Path
) -> None:
    (ws / "d").mkdir()
    (ws / "d" / "secret.txt").write_text("mine\n")
    target = locate(ctx, "d/secret.txt")  # checked while d is a real folder
    shutil.rmtree(ws / "d")
    (ws / "d").symlink_to(outside)  # the swap
    with pytest.raises(WorkspaceError, match="changed while it was being opened"):
        _fsafe.open_dir(target.root, target.parts[:-1], shown=target.shown)


async def test_racing_folder_swaps_never_reach_outside(call: Call, ws: Path, outside: Path) -> None:
    """A thread flips ``ws/d`` between a real folder and a symlink to ``outside``."""
    stop = threading.Event()

    def flip() -> None:
        rng = random.Random(7)
        while not stop.is_set():
            real, link = ws / "d", ws / "d.link"
            try:
                if rng.random() < 0.5:
                    if real.is_symlink():
                        real.unlink()
                    real.mkdir()
                    (real / "secret.txt").write_text("mine\n")
                else:
                    if not real.is_symlink():
                        shutil.rmtree(real, ignore_errors=True)
                    link.unlink(missing_ok=True)
                    link.symlink_to(outside)
                    os.replace(link, real)
            except OSError:
                pass

    flipper = threading.Thread(target=flip)
    flipper.start()
    leaked = []
    try:
        for i in range(150):
            read = await call("Read", file_path="d/secret.txt")
            if "top secret" in read.content:
                leaked.append(read.content)
            await call("Write", file_path="d/secret.txt", content=f"pwned {i}")
    finally:
        stop.set()
        flipper.join()
    assert leaked == []
    assert (outside / "secret.txt").read_text() == "top secret\n"
    assert sorted(os.listdir(outside)) == ["secret.txt"]


# -- hard links ---------------------------------------------------------------------------


async def test_hard_links_are_refused_and_say_why(call: Call, ws: Path, outside: Path) -> None:
    os.link(outside / "secret.txt", ws / "hl.txt")
    for name, args in [
        ("Read", {}),
        ("Edit", {"old_string": "top", "new_string": "pwned"}),
        ("Write", {"content": "pwned"}),
    ]:
        result = await call(name, file_path="hl.txt", **args)
        assert result.is_error, name
        assert "2 hard links" in result.content
    grep = await call("Grep", pattern="secret", output_mode="content")
    assert "top secret" not in grep.content
    assert (outside / "secret.txt").read_text() == "top secret\n"


# -- FIFOs never block --------------------------------------------------------------------


async def test_write_read_and_edit_of_a_fifo_fail_at_once(call: Call, ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    for name, args in [
        ("Write", {"content": "x"}),
        ("Read", {}),
        ("Edit", {"old_string": "a", "new_string": "b"}),
    ]:
        result = await asyncio.wait_for(call(name, file_path="pipe", **args), 30)
        assert result.is_error, name
        assert "FIFO" in result.content


async def test_grep_and_glob_over_a_folder_with_a_fifo_return(call: Call, ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    (ws / "a.txt").write_text("needle\n")
    grep = await asyncio.wait_for(call("Grep", pattern="needle"), 30)
    assert grep.content.splitlines()[:2] == ["Found 1 files", "a.txt"]
    glob = await asyncio.wait_for(call("Glob", pattern="*"), 30)
    assert glob.content.splitlines() == ["a.txt"]


# -- bounded reads ------------------------------------------------------------------------


async def test_sparse_2gb_file_with_a_text_header_is_read_bounded(call: Call, ws: Path) -> None:
    path = ws / "sparse.log"
    with path.open("wb") as f:
        f.write(b"header one\nheader two\n" + b"x" * 9000)
        f.truncate(2 * 1024**3)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    read_before = _bytes_read()
    result = await call("Read", file_path="sparse.log")
    read = _bytes_read() - read_before
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert not result.is_error
    assert "\0" not in result.content
    lines = result.content.splitlines()
    assert lines[:2] == ["     1\theader one", "     2\theader two"]
    assert "binary data" in lines[-1] or "stopped after scanning" in lines[-1]
    assert len(result.content) < 10_000
    assert read < READ_SCAN_BYTES + 16 * 1024**2, read  # not the 2 GB
    assert grown_mb < 200, grown_mb


async def test_a_huge_limit_is_capped(call: Call, ws: Path) -> None:
    (ws / "many.txt").write_text("".join(f"line {i} " + "y" * 40 + "\n" for i in range(60_000)))
    result = await call("Read", file_path="many.txt", limit=1_000_000_000)
    assert not result.is_error
    assert len(result.content) < READ_MAX_CHARS + 200
    assert "read more with offset=" in result.content.splitlines()[-1]


async def test_edit_of_a_huge_file_is_refused_without_reading_it(call: Call, ws: Path) -> None:
    with (ws / "huge.txt").open("wb") as f:
        f.write(b"needle\n")
        f.truncate(256 * 1024**2)
    read_before = _bytes_read()
    result = await call("Edit", file_path="huge.txt", old_string="needle", new_string="pin")
    read = _bytes_read() - read_before
    assert result.is_error
    assert "Edit only changes files up to" in result.content
    assert read < 1024**2, read  # refused on its size: none of its 256 MB were read


async def test_edit_runs_off_the_event_loop(
    call: Call, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Which thread does the reading and replacing: a stall measured in seconds would
    # depend on the machine's speed and load (CI once saw a GC pause fail it).
    threads: list[threading.Thread] = []
    real_edit = fs._edit

    def recording_edit(*args: object) -> object:
        threads.append(threading.current_thread())
        return real_edit(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(fs, "_edit", recording_edit)
    (ws / "big.txt").write_text("abc\n" * 300_000)
    result = await call(
        "Edit", file_path="big.txt", old_string="abc", new_string="xyz", replace_all=True
    )
    assert not result.is_error, result.content
    assert (ws / "big.txt").read_text() == "xyz\n" * 300_000
    assert threads and threads[0] is not threading.main_thread()
    assert threads[0] is not threading.current_thread()


# -- Grep: a nested-repeat regex runs in linear time; a slow search is stopped -----------


async def test_catastrophic_regex_finishes_and_the_loop_keeps_running(call: Call, ws: Path) -> None:
    (ws / "a.txt").write_text("a" * 60 + "b\n")
    (ws / "b.txt").write_text("a" * 60 + "\n")
    # A backtracking engine would take 2^60 steps: the search would be stopped after
    # GREP_TIMEOUT_S with an error, not answer; and while it runs, the loop serves others.
    result, ticks = await _ticks_while(call("Grep", pattern="^(a|aa)+$"))
    assert result.content.splitlines() == ["Found 1 files", "b.txt"]
    assert ticks > 0


async def test_a_search_past_its_time_is_stopped(
    call: Call, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search, "GREP_TIMEOUT_S", 0)
    (ws / "a.txt").write_text("needle\n")
    result = await call("Grep", pattern="needle")
    assert result.is_error
    assert "Grep stopped after 0 s" in result.content


async def test_grep_still_finds_and_reports_bad_paths(call: Call, ws: Path) -> None:
    (ws / "src").mkdir()
    (ws / "src" / "m.py").write_text("def f():\n    return 1\n")
    found = await call("Grep", pattern=r"def \w+", path="src", output_mode="content")
    assert found.content == "src/m.py:1:def f():"
    single = await call("Grep", pattern="return", path="src/m.py", output_mode="count")
    assert single.content == "src/m.py:1"
    missing = await call("Grep", pattern="x", path="nope")
    assert missing.is_error
    assert "does not exist" in missing.content


# -- Glob never leaves the workspace, and its errors name no outside path ------------------


async def test_glob_refuses_dotdot_and_leaks_no_outside_path(
    call: Call, ws: Path, outside: Path
) -> None:
    for pattern in ["../../**", "**/../../*", "a/../../outside/*"]:
        result = await asyncio.wait_for(call("Glob", pattern=pattern), 30)
        assert result.is_error, pattern
        assert str(outside) not in result.content
        assert str(ws.parent) not in result.content
    result = await call("Glob", pattern="*", path="missing")
    assert result.is_error
    assert str(ws) not in result.content
