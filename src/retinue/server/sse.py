"""Server-sent events: one main-agent turn streamed as its agent tree's progress events.

Each event is a frame ``event: <kind>`` with the JSON of :meth:`Event.to_dict`; the turn
ends with ``event: result`` (the same JSON as the non-streaming answer) or ``event: error``
(``{"error": ..., "status": ...}``). A client that disconnects cancels its turn. Agent ids
are shown as the tenant's clients see them (see :mod:`retinue.server.tenants`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict, is_dataclass
from typing import Any

from retinue.engine.config import RunOutput
from retinue.events import Event, EventSink
from retinue.messages import Content
from retinue.server.tenants import TenantSpace

__all__ = ["ErrorMapper", "TurnFeed", "frame", "jsonable", "output_json", "stream_turn"]

ErrorMapper = Callable[[BaseException], tuple[int, str]]


def jsonable(value: Any) -> Any:
    """``json.dumps``'s ``default`` for events: dataclasses as dicts, anything else as text."""
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    return str(value)


def frame(kind: str, data: dict[str, Any]) -> str:
    """One SSE frame."""
    return f"event: {kind}\ndata: {json.dumps(data, default=jsonable)}\n\n"


def output_json(out: RunOutput) -> dict[str, Any]:
    """What a turn answers: the reply, why it stopped, its tokens and the tools it used."""
    return {
        "content": out.content,
        "stop_reason": out.stop_reason,
        "usage": asdict(out.usage),
        "tools_used": out.tools_used,
    }


class TurnFeed:
    """A turn started with a sink of its own, its events read as they happen.

    ``start(sink)`` starts the turn (a task) with ``sink`` as its event sink; :meth:`events`
    yields them until the turn is done, then :attr:`turn` holds the outcome. :meth:`close`
    cancels a turn still running (its reader went away); call it in a ``finally``.
    """

    def __init__(self, start: Callable[[EventSink], asyncio.Task[RunOutput]]) -> None:
        self._queue: asyncio.Queue[Event | None] = asyncio.Queue()
        self.turn = start(self._queue.put_nowait)
        self.turn.add_done_callback(lambda _t: self._queue.put_nowait(None))

    async def events(self) -> AsyncIterator[Event]:
        while (event := await self._queue.get()) is not None:
            yield event

    def outcome(self, errors: ErrorMapper) -> RunOutput | tuple[int, str]:
        """The finished turn's output, or the status and message of its failure."""
        if self.turn.cancelled():
            return 409, "the turn was cancelled"
        if (exc := self.turn.exception()) is not None:
            return errors(exc)
        return self.turn.result()

    def close(self) -> None:
        if not self.turn.done():
            self.turn.cancel()


async def stream_turn(
    space: TenantSpace,
    cid: str,
    text: Content,
    *,
    keep_sessions: bool,
    errors: ErrorMapper,
) -> AsyncIterator[str]:
    """Run one turn of ``cid`` and yield its events as they happen, then its result."""
    host = space.host
    feed = TurnFeed(lambda sink: host.start(cid, text, keep_sessions=keep_sessions, on_event=sink))
    try:
        async for event in feed.events():
            yield frame(event.kind, space.shown(event.to_dict()))
        outcome = feed.outcome(errors)
        if isinstance(outcome, RunOutput):
            yield frame("result", space.shown(output_json(outcome)))
        else:
            yield frame("error", {"error": outcome[1], "status": outcome[0]})
    finally:
        feed.close()  # the client went away: its turn ends
