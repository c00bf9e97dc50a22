"""The threads plain ``def`` tools run in, off the event loop.

A plain tool may block (a file, a socket, a subprocess), so it runs in one of at most
:data:`SYNC_TOOL_THREADS` daemon threads and the loop goes on with every other session
meanwhile; cancelling the caller returns at once and the result is dropped when it comes.

Most plain tools return in microseconds, and then the hand-off costs more than the tool: a
wake-up of the loop through its self-pipe, an ``epoll`` round and a future's callbacks. So a
call of a tool whose last call took less than :data:`QUICK_S` is waited for on the loop's own
thread, with the GIL released, for about :data:`WAIT_S` (plus the time to get the GIL back
from other threads), when a thread is idle to take it. A call that overruns is then awaited
like any other (the thread delivers it to the loop instead), and that tool is never waited
for again in this process. Like an ``async def`` tool that does not await, a quick call
gives no other task a turn while it runs.

Why not ``asyncio.to_thread`` under a semaphore, or anyio's ``to_thread.run_sync`` with a
``CapacityLimiter`` (as Starlette and pydantic-ai run plain functions)? Issue 42 measured
both against this pool (``benchmarks/swaps_threads.py``, 5 interleaved rounds, fresh
processes, results in ``benchmarks/results/swaps_threads.json``). Both join their threads
when the program ends (``asyncio.run`` waits for the default executor; anyio's workers are
not daemons), so a program whose plain tool is stuck for good -- a library call on a dead
peer -- never exits: each was still running 10 s after its run was cancelled and the
program's main coroutine had returned, in every round, where the pool's process was gone
in 0.15-0.52 s (``tests/tools/test_threads.py`` checks it). They also cost more: a no-op
tool call took 62 us (``to_thread``) and 84 us (anyio) of CPU against 42 us here, an
in-process turn 1.35-1.5x and about 2x the pool's CPU (medians of the rounds' ratios).
With 100 runs of a 50 ms tool all three took the same wall time and kept the loop's stalls
under 100 ms.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["QUICK_S", "SYNC_TOOL_THREADS", "WAIT_S", "Pace", "run_sync"]

SYNC_TOOL_THREADS = min(32, (os.cpu_count() or 1) + 4)
"""How many plain ``def`` tools run at once (the pool's size, as ``asyncio.to_thread``'s)."""

QUICK_S = 0.0002
"""A tool whose last call took less than this (in its thread) is waited for on the loop."""

WAIT_S = 0.001
"""The longest the loop's thread waits for a quick tool before awaiting it instead."""


class Pace:
    """How one plain tool's calls have gone: how long the last took in its thread (whatever
    its outcome), and whether a call may still be waited for on the loop's thread."""

    __slots__ = ("took", "waits")

    def __init__(self) -> None:
        self.took: float | None = None
        self.waits = True  # until a call overruns the wait

    def quick(self) -> bool:
        return self.waits and self.took is not None and self.took < QUICK_S


class _Job:
    """One call: what to run, and how its outcome reaches the caller -- ``ready`` released
    while the caller waits on the loop's thread, else ``future`` set through the loop."""

    __slots__ = (
        "context",
        "fn",
        "future",
        "handoff",
        "kwargs",
        "loop",
        "outcome",
        "pace",
        "ready",
    )

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        fn: Callable[..., Any],
        kwargs: dict[str, Any],
        pace: Pace | None = None,
    ) -> None:
        self.loop = loop
        self.fn = fn
        self.kwargs = kwargs
        self.pace = pace
        self.context = contextvars.copy_context()
        self.future: asyncio.Future[Any] | None = None
        self.ready: threading.Lock | None = None
        self.handoff: threading.Lock | None = None  # orders the outcome against a switch
        self.outcome: tuple[bool, Any] | None = None

    def wait_here(self) -> threading.Lock:
        """Make the job one its caller waits for on the loop's thread: the lock to wait on."""
        self.handoff = threading.Lock()
        self.ready = ready = threading.Lock()
        ready.acquire()
        return ready

    def run(self) -> None:
        future = self.future
        if future is not None and future.cancelled():  # abandoned before its turn came
            return
        started = time.perf_counter()
        try:
            outcome: tuple[bool, Any] = (True, self.context.run(self.fn, **self.kwargs))
        except StopIteration as exc:  # a future cannot carry it (nor a coroutine raise it)
            error = RuntimeError("the tool raised StopIteration")
            error.__cause__ = exc
            outcome = (False, error)
        except BaseException as exc:  # delivered to the caller, as run_in_executor does
            outcome = (False, exc)
        if self.pace is not None:
            self.pace.took = time.perf_counter() - started
        if self.handoff is not None:
            with self.handoff:
                self.outcome = outcome
                future = self.future
            if future is None:  # the caller is waiting on the loop's thread (or has stopped)
                assert self.ready is not None
                self.ready.release()
                return
        assert future is not None
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody to tell
            self.loop.call_soon_threadsafe(_deliver, future, outcome)

    def switch_to_future(self) -> asyncio.Future[Any] | None:
        """From waiting on the loop's thread to awaiting: the future the outcome will be
        delivered to, or ``None`` when the outcome is already here."""
        assert self.handoff is not None
        with self.handoff:
            if self.outcome is None:
                self.future = self.loop.create_future()
            return self.future


def _deliver(future: asyncio.Future[Any], outcome: tuple[bool, Any]) -> None:
    """A tool thread's outcome, unless its caller has gone (then it is dropped)."""
    if future.done():
        return
    ok, value = outcome
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


class _ToolThreads:
    """At most ``limit`` daemon threads fed from one ``SimpleQueue``, started as needed.

    Leaner than ``ThreadPoolExecutor.submit`` (no ``concurrent.futures.Future``, no work
    item, no semaphore): the hand-off of a plain ``def`` tool is on every turn that calls
    one. ``idle`` threads wait on the queue with nothing promised to them; ``backlog`` jobs
    wait for a busy thread; the counters change under one lock, so a job never waits while
    a thread is idle and no more than ``limit`` threads ever start. The threads are daemons:
    a tool still blocking when the process exits does not hold the exit up.
    """

    __slots__ = ("_backlog", "_idle", "_jobs", "_lock", "_started", "limit")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = self._backlog = self._started = 0

    def submit(self, job: _Job) -> bool:
        """Queue ``job``; whether a thread takes it at once (an idle one, or a new one)."""
        name = ""
        taken = True
        with self._lock:
            if self._idle:
                self._idle -= 1
            elif self._started < self.limit:
                self._started += 1
                name = f"retinue-tool-{self._started}"
            else:
                self._backlog += 1
                taken = False
        if name:  # a new thread for this job (it waits on the queue until the job is there)
            try:
                threading.Thread(target=self._work, name=name, daemon=True).start()
            except BaseException:  # no thread to be had: the job is not queued either
                with self._lock:
                    self._started -= 1
                raise
        self._jobs.put(job)
        return taken

    def _work(self) -> None:
        get, lock = self._jobs.get, self._lock
        while True:
            get().run()
            with lock:
                if self._backlog:
                    self._backlog -= 1
                    continue
                self._idle += 1


_threads = _ToolThreads(SYNC_TOOL_THREADS)


def _after_fork() -> None:  # a forked child has none of its parent's threads
    global _threads
    _threads = _ToolThreads(SYNC_TOOL_THREADS)


os.register_at_fork(after_in_child=_after_fork)


async def run_sync(fn: Callable[..., Any], kwargs: dict[str, Any], pace: Pace | None = None) -> Any:
    """``fn(**kwargs)`` in the tool threads, with the caller's context variables. ``pace``:
    the tool's record (updated here), when a quick one may be waited for on the loop's thread.

    Cancelling the awaiting task returns at once: the thread cannot be stopped, so it
    finishes in the background and its result (or exception) is dropped.
    """
    loop = asyncio.get_running_loop()
    job = _Job(loop, fn, kwargs, pace)
    if pace is not None and pace.quick():
        ready = job.wait_here()
        if _threads.submit(job):
            if ready.acquire(timeout=WAIT_S):
                return _unwrap(job)
            pace.waits = False  # it overran: never held up for again
        future = job.switch_to_future()
        if future is None:  # it ended as the wait ran out
            return _unwrap(job)
    else:
        job.future = future = loop.create_future()
        _threads.submit(job)
    return await future


def _unwrap(job: _Job) -> Any:
    assert job.outcome is not None
    ok, value = job.outcome
    job.outcome = None  # (a raised error's traceback holds this frame: no cycle through it)
    if not ok:
        raise value
    return value
