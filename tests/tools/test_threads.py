"""The tool threads: a quick plain tool is waited for on the loop's thread, never for long."""

from __future__ import annotations

import asyncio
import contextvars
import random
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from retinue import ToolContext, ToolError, tool
from retinue.tools import _threads
from retinue.tools._threads import QUICK_S, WAIT_S, Pace, _Job, _ToolThreads, run_sync

WHO = contextvars.ContextVar("who", default="nobody")


def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext("main", tmp_path, tmp_path)


async def test_a_quick_tool_is_waited_for_without_a_loop_round(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_threads, "WAIT_S", 10.0)  # a loaded machine: the wait never runs out

    @tool
    def where() -> str:
        return f"{threading.current_thread().name} {WHO.get()}"

    WHO.set("ada")
    ran: list[str] = []
    loop = asyncio.get_running_loop()
    loop.call_soon(ran.append, "round 1")
    first = await where.invoke(ctx(tmp_path), "{}")  # awaited: nothing known of it yet
    assert ran == ["round 1"] and where._pace.took is not None
    # taken for quick, the next call is waited for on this thread: no callback runs meanwhile
    where._pace.took = 0.0
    loop.call_soon(ran.append, "round 2")
    second = await where.invoke(ctx(tmp_path), "{}")
    assert ran == ["round 1"]
    # still in a tool thread, with the caller's context, as before
    assert first.startswith("retinue-tool") and first.endswith(" ada")
    assert second.startswith("retinue-tool") and second.endswith(" ada")
    # a tool that was slow last time is awaited: the loop goes round meanwhile
    where._pace.took = 1.0
    await where.invoke(ctx(tmp_path), "{}")
    assert ran == ["round 1", "round 2"]


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
    sometimes_slow._pace.took = 0.0  # quick, whatever this machine's load made of it
    call = asyncio.create_task(sometimes_slow.invoke(ctx(tmp_path), "{}"))
    # the loop gets back here while the tool blocks (it was waited for WAIT_S at most):
    # held until the tool returned, nothing could release it before its 10 s ran out
    while not entered.is_set():
        await asyncio.sleep(0.001)
    await asyncio.sleep(WAIT_S * 5)
    assert not call.done()
    release.set()
    assert await call == "released"
    assert sometimes_slow._pace.took is not None and sometimes_slow._pace.took > WAIT_S
    assert not sometimes_slow._pace.waits  # it overran: never waited for again


async def test_cancelling_a_quick_tool_that_blocks_returns_at_once(tmp_path: Path) -> None:
    entered, release, done = threading.Event(), threading.Event(), threading.Event()

    @tool
    def block() -> str:
        entered.set()
        release.wait(10)
        done.set()
        return "late"

    block._pace.took = 0.0  # taken for quick: waited on the loop's thread first
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
    flaky._pace.took = 0.0
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
        pace = Pace()
        pace.took = 0.0
        assert await _threads.run_sync(sleeper, {"seconds": seconds, "n": n}, pace) == n
        assert pace.took is not None and pace.took >= seconds


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


# -- from a review: the hand-off's interleavings made deterministic, and the outcomes that
# must reach the caller


@pytest.fixture
def own_pool(monkeypatch: pytest.MonkeyPatch) -> Iterator[_ToolThreads]:
    """A fresh pool of 8 threads, so a count of waits does not hang on other tests' threads."""
    pool = _ToolThreads(8)
    monkeypatch.setattr(_threads, "_threads", pool)
    yield pool


def quick_job(loop: asyncio.AbstractEventLoop, fn: Any) -> _Job:
    """A job as the quick path makes it: ``ready`` held by the caller, no future yet."""
    job = _Job(loop, fn, {})
    job.wait_here()
    return job


async def test_an_outcome_written_before_the_switch_is_read_without_a_future() -> None:
    job = quick_job(asyncio.get_running_loop(), lambda: "early")
    job.run()  # the tool ends after the wait ran out, before the caller switches
    assert job.switch_to_future() is None
    assert job.outcome == (True, "early")
    assert job.ready is not None and job.ready.acquire(blocking=False)  # released, harmless


async def test_an_outcome_after_the_switch_goes_through_the_loop() -> None:
    job = quick_job(asyncio.get_running_loop(), lambda: "late")
    future = job.switch_to_future()  # the wait ran out first
    assert future is not None and not future.done()
    job.run()
    assert await future == "late"
    assert job.ready is not None and not job.ready.acquire(blocking=False)  # never released


def quick_pace() -> Pace:
    pace = Pace()
    pace.took = 0.0
    return pace


@pytest.mark.parametrize("quick", [True, False], ids=["quick", "awaited"])
async def test_a_base_exception_from_a_tool_reaches_its_caller(quick: bool) -> None:
    def leave() -> None:
        raise SystemExit(3)

    with pytest.raises(SystemExit):
        await run_sync(leave, {}, quick_pace() if quick else None)


async def test_a_quick_tool_that_calls_back_into_the_loop_does_not_deadlock() -> None:
    loop = asyncio.get_running_loop()

    async def two() -> int:
        return 2

    def back() -> int:  # waits on the loop the caller may be holding
        return asyncio.run_coroutine_threadsafe(two(), loop).result(10)

    pace = quick_pace()
    assert await run_sync(back, {}, pace) == 2  # the loop's wait runs out, then it helps
    assert not pace.waits


async def test_a_cancelled_call_that_waited_for_a_busy_pool_never_runs() -> None:
    pool = _ToolThreads(1)
    loop = asyncio.get_running_loop()
    release, ran = threading.Event(), threading.Event()
    first = _Job(loop, release.wait, {"timeout": 10})
    first.future = loop.create_future()
    pool.submit(first)
    second = quick_job(loop, ran.set)
    assert not pool.submit(second)  # the quick path does not wait for it: it switches
    future = second.switch_to_future()
    assert future is not None
    future.cancel()
    third = _Job(loop, lambda: "third", {})
    third.future = loop.create_future()
    pool.submit(third)
    release.set()
    assert await first.future is True and await third.future == "third"
    assert not ran.is_set()  # the one thread skipped the cancelled job before the third


async def test_many_sessions_calling_quick_tools_each_get_their_own_result(
    tmp_path: Path,
) -> None:
    """200 concurrent sessions, each calling plain tools (some quick, some that yield their
    thread), seeded: every result reaches its own session, whichever path it took."""
    rng = random.Random(1919)

    @tool
    def echo(n: int) -> str:
        return str(n)

    @tool
    def nap(n: int) -> str:
        threading.Event().wait(0.0005)
        return str(n)

    echo._pace.took = nap._pace.took = 0.0

    async def session(s: int) -> list[str]:
        plan = [(rng.choice((echo, nap)), s * 10 + k) for k in range(5)]
        return [await t.invoke(ctx(tmp_path), f'{{"n": {n}}}') for t, n in plan]

    results = await asyncio.gather(*(session(s) for s in range(200)))
    assert results == [[str(s * 10 + k) for k in range(5)] for s in range(200)]


@pytest.mark.parametrize("quick", [True, False], ids=["quick", "awaited"])
async def test_a_tool_raising_stop_iteration_does_not_hang_its_caller(quick: bool) -> None:
    loop = asyncio.get_running_loop()
    dropped = asyncio.Event()
    loop.set_exception_handler(lambda _loop, _context: dropped.set())

    def exhausted() -> int:
        return next(iter([]))

    call = asyncio.ensure_future(run_sync(exhausted, {}, quick_pace() if quick else None))
    waiter = asyncio.ensure_future(dropped.wait())
    await asyncio.wait([call, waiter], timeout=10, return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    loop.set_exception_handler(None)
    ended = call.done()
    call.cancel()
    assert ended  # (a future refuses StopIteration: set on one, the call would never end)
    assert isinstance(call.exception(), RuntimeError)
    assert "StopIteration" in str(call.exception())


async def test_a_quick_tool_that_fails_slowly_is_not_waited_for_again(tmp_path: Path) -> None:
    entered, release = threading.Event(), threading.Event()

    @tool
    def fetch() -> str:
        entered.set()
        release.wait(10)
        raise OSError("timed out")

    fetch._pace.took = 0.0  # it was quick last time
    call = asyncio.create_task(fetch.invoke(ctx(tmp_path), "{}"))
    while not entered.is_set():
        await asyncio.sleep(0.001)
    await asyncio.sleep(0.005)  # it runs well past WAIT_S
    release.set()
    with pytest.raises(OSError):
        await call
    assert fetch._pace.took is not None and fetch._pace.took >= QUICK_S
    assert not fetch._pace.waits


async def test_a_quick_tool_that_overruns_is_waited_for_once(
    tmp_path: Path, own_pool: _ToolThreads, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sessions that call a tool while an earlier call of it overruns: each holds the loop
    for WAIT_S (up to the pool's size, e.g. a tool queued on a shared lock)."""
    release = threading.Event()
    switches = 0
    switch = _Job.switch_to_future

    def counted(job: _Job) -> asyncio.Future[Any] | None:
        nonlocal switches
        switches += 1
        return switch(job)

    monkeypatch.setattr(_Job, "switch_to_future", counted)

    @tool
    def contended() -> str:
        release.wait(10)
        return "done"

    contended._pace.took = 0.0
    calls = [asyncio.create_task(contended.invoke(ctx(tmp_path), "{}")) for _ in range(4)]
    await asyncio.sleep(0)  # all four start, one after another, on this thread
    release.set()
    assert await asyncio.gather(*calls) == ["done"] * 4
    assert switches == 1  # only the first held the loop's thread; the others were awaited


STUCK_RUN = """
import asyncio, contextlib, threading
from pathlib import Path
from retinue import ToolContext, tool

async def main() -> None:
    loop = asyncio.get_running_loop()
    entered = asyncio.Event()

    @tool
    def hang() -> str:
        loop.call_soon_threadsafe(entered.set)
        threading.Event().wait()  # a library call stuck on a dead peer: never returns
        return "never"

    call = asyncio.create_task(hang.invoke(ToolContext("main", Path.cwd(), Path.cwd()), "{}"))
    await entered.wait()
    call.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await call
    print("cancelled", flush=True)

asyncio.run(main())
"""


def test_a_plain_tool_stuck_for_good_does_not_hold_up_the_process_exit(tmp_path: Path) -> None:
    """The tool threads are daemons: a program whose plain tool never returns still exits
    once its run is over (asyncio's default executor, and anyio's worker threads, are joined
    at exit: that process would hang)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", STUCK_RUN], cwd=tmp_path, stdout=subprocess.PIPE, text=True
    )
    try:
        out, _ = proc.communicate(timeout=60)  # a guard against a hang, not a measure
    finally:
        proc.kill()
    assert out.strip() == "cancelled"
    assert proc.returncode == 0
