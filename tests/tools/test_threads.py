"""The tool threads: a quick plain tool is waited for on the loop's thread, never for long."""

from __future__ import annotations

import asyncio
import contextvars
import random
import threading
import time
from pathlib import Path

import pytest

from retinue import ToolContext, ToolError, tool
from retinue.tools import _threads
from retinue.tools._threads import QUICK_S, WAIT_S, _Job, _ToolThreads

WHO = contextvars.ContextVar("who", default="nobody")


def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext("main", tmp_path, tmp_path)


async def test_a_quick_tool_is_waited_for_without_a_loop_round(tmp_path: Path) -> None:
    @tool
    def where() -> str:
        return f"{threading.current_thread().name} {WHO.get()}"

    WHO.set("ada")
    first = await where.invoke(ctx(tmp_path), "{}")  # awaited: nothing known of it yet
    assert where._took is not None and where._took < QUICK_S
    # the next call is waited for on this thread: no other callback runs meanwhile
    ran: list[str] = []
    asyncio.get_running_loop().call_soon(ran.append, "a loop round")
    second = await where.invoke(ctx(tmp_path), "{}")
    assert ran == []
    # still in a tool thread, with the caller's context, as before
    assert first.startswith("retinue-tool") and first.endswith(" ada")
    assert second.startswith("retinue-tool") and second.endswith(" ada")
    # a tool that was slow last time is awaited: the loop goes round meanwhile
    where._took = 1.0
    await where.invoke(ctx(tmp_path), "{}")
    assert ran == ["a loop round"]


async def test_a_quick_tool_that_blocks_does_not_hold_the_loop(tmp_path: Path) -> None:
    entered, release = threading.Event(), threading.Event()
    calls = 0

    @tool
    def sometimes_slow() -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            return "quick"
        entered.set()
        return "released" if release.wait(10) else "never released"

    assert await sometimes_slow.invoke(ctx(tmp_path), "{}") == "quick"
    call = asyncio.create_task(sometimes_slow.invoke(ctx(tmp_path), "{}"))
    # the loop gets back here while the tool blocks (it was waited for WAIT_S at most):
    # held until the tool returned, nothing could release it before its 10 s ran out
    while not entered.is_set():
        await asyncio.sleep(0.001)
    await asyncio.sleep(WAIT_S * 5)
    assert not call.done()
    release.set()
    assert await call == "released"
    assert sometimes_slow._took is not None and sometimes_slow._took > WAIT_S


async def test_cancelling_a_quick_tool_that_blocks_returns_at_once(tmp_path: Path) -> None:
    entered, release, done = threading.Event(), threading.Event(), threading.Event()

    @tool
    def block() -> str:
        entered.set()
        release.wait(10)
        done.set()
        return "late"

    block._took = 0.0  # taken for quick: waited on the loop's thread first
    call = asyncio.create_task(block.invoke(ctx(tmp_path), "{}"))
    while not entered.is_set():
        await asyncio.sleep(0.001)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    release.set()
    assert await asyncio.to_thread(done.wait, 10)  # finished in its thread; result dropped


async def test_an_error_from_a_quick_tool_reaches_the_caller(tmp_path: Path) -> None:
    calls = 0

    @tool
    def flaky() -> str:
        nonlocal calls
        calls += 1
        if calls > 1:
            raise ToolError("the disk is full")
        return "fine"

    assert await flaky.invoke(ctx(tmp_path), "{}") == "fine"
    with pytest.raises(ToolError, match="disk is full"):
        await flaky.invoke(ctx(tmp_path), "{}")


async def test_every_outcome_reaches_its_own_caller_around_the_wait() -> None:
    """Calls that end just before, at, or just after the wait runs out: each caller gets its
    own result, whichever way it came (seeded)."""
    rng = random.Random(19)

    def sleeper(seconds: float, n: int) -> int:
        time.sleep(seconds)
        return n

    for n in range(150):
        seconds = rng.uniform(0.0, 2 * WAIT_S)
        value, took = await _threads.run_sync(sleeper, {"seconds": seconds, "n": n}, last=0.0)
        assert value == n and took >= seconds


async def test_a_call_that_would_wait_for_a_busy_pool_is_not_waited_for() -> None:
    pool = _ToolThreads(1)
    loop = asyncio.get_running_loop()
    release = threading.Event()
    first = _Job(loop, release.wait, {"timeout": 10})
    first.future = loop.create_future()
    assert pool.submit(first)  # a new thread takes it
    second = _Job(loop, lambda: "second", {})
    second.future = loop.create_future()
    assert not pool.submit(second)  # it waits for the busy thread
    release.set()
    assert await first.future is True
    assert await second.future == "second"
