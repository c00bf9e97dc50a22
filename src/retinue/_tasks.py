"""Small helpers for tasks that run work on behalf of a waiter (a session turn, a chat turn).

The work runs in its own task so it can be cancelled on its own (an interrupt) without
cancelling the waiter; a cancelled waiter, in turn, takes its task down with it. Work that
must finish (a close) is waited for with :func:`finish` instead.
"""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar

__all__ = ["cancel_and_wait", "finish", "wait_owned"]

T = TypeVar("T")


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


async def cancel_and_wait(*tasks: asyncio.Future[Any]) -> None:
    """Cancel each of ``tasks`` that still runs and wait until all have finished; what they
    ended with is read (no "never retrieved" warning), not raised.

    Not ``gather(..., return_exceptions=True)``: a waiter cancelled while it waits there
    gets the cancelled child's bare ``CancelledError``, not its own, and an anyio cancel
    scope (an MCP request's, a Starlette response's) then takes that for a foreign
    cancellation and lets it escape: its task group cancels every other task in it. Here the
    waiter's own cancellation propagates as it came.
    """
    for task in tasks:
        task.add_done_callback(_read)
        if not task.done():
            task.cancel()
    if tasks:
        await asyncio.wait(tasks)


def _read(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


async def finish(task: asyncio.Future[T]) -> T:
    """Wait until ``task`` is done even if the waiter is cancelled meanwhile, then re-raise.

    For work that must not be cut short (closing a session, consolidating its memory): the
    work runs in ``task``, owned by whoever created it, and a cancelled waiter still waits
    for it, so that when the waiter's cancellation propagates, nothing is left half done.
    """
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError as exc:
            cancelled = exc
    if cancelled is not None:
        raise cancelled
    return task.result()
