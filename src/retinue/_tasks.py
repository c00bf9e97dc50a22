"""Small helpers for tasks that run work on behalf of a waiter (a session turn, a chat turn).

The work runs in its own task so it can be cancelled on its own (an interrupt) without
cancelling the waiter; a cancelled waiter, in turn, takes its task down with it.
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["cancel_and_wait", "wait_owned"]


async def wait_owned(task: asyncio.Task[Any]) -> None:
    """Wait until ``task`` is done, whatever its outcome (its own cancellation included).

    If the waiter is cancelled meanwhile, ``task`` is cancelled too and awaited, then the
    cancellation propagates.
    """
    try:
        await asyncio.wait({task})
    except asyncio.CancelledError:
        await cancel_and_wait(task)
        raise


async def cancel_and_wait(task: asyncio.Task[Any]) -> None:
    """Cancel ``task`` if it still runs and wait until it has finished."""
    if not task.done():
        task.cancel()
        await asyncio.wait({task})
