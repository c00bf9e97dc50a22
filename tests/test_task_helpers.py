"""``retinue._tasks.cancel_and_wait`` under an anyio cancel scope (an MCP request's, a
Starlette response's): the scope's own cancellation, arriving while the jobs are being
cancelled, stays the scope's, so the scope catches it and nothing else in its task group
is cancelled. ``gather(..., return_exceptions=True)`` fails this (the MCP server's
tasks/result answered every request in flight with "Connection closed" that way)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

from retinue._tasks import cancel_and_wait

Cleanup = Callable[..., Awaitable[None]]


async def _gather(*jobs: asyncio.Future[Any]) -> None:
    for job in jobs:
        job.cancel()
    await asyncio.gather(*jobs, return_exceptions=True)


async def _escapes(cleanup: Cleanup, delay: int) -> bool:
    """Whether a CancelledError escapes a scope cancelled ``delay`` loop turns after
    ``cleanup`` starts on a gather of two sleeps and an event wait."""
    inner = asyncio.ensure_future(asyncio.gather(asyncio.sleep(3600), asyncio.sleep(3600)))
    other = asyncio.ensure_future(asyncio.Event().wait())
    await asyncio.sleep(0)
    loop = asyncio.get_running_loop()
    try:
        with anyio.CancelScope() as scope:

            def later(turns: int) -> None:
                if turns == 0:
                    scope.cancel()
                else:
                    loop.call_soon(later, turns - 1)

            loop.call_soon(later, delay)
            await cleanup(inner, other)
            await asyncio.sleep(60)  # (cancelled here, if not before)
    except asyncio.CancelledError:
        return True
    finally:  # both were cancelled (they end, whether or not the wait was cut short)
        await asyncio.wait({inner, other})
    return False


@pytest.mark.parametrize("delay", range(6))
async def test_the_scope_catches_its_own_cancellation(delay: int) -> None:
    assert not await _escapes(cancel_and_wait, delay)


async def test_gather_lets_the_scope_cancellation_escape() -> None:
    """The contrast that makes the test above mean something (CPython's gather hands the
    waiter a cancelled child's bare CancelledError)."""
    assert any([await _escapes(_gather, delay) for delay in range(6)])


async def test_what_the_jobs_ended_with_is_read_not_raised() -> None:
    async def fails() -> None:
        raise ValueError("boom")

    failed = asyncio.ensure_future(fails())
    await asyncio.sleep(0)
    running = asyncio.ensure_future(asyncio.sleep(3600))
    await cancel_and_wait(failed, running)
    assert running.cancelled() and isinstance(failed.exception(), ValueError)
