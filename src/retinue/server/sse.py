"""Server-sent events: one main-agent turn streamed as its agent tree's progress events.

Each event is a frame ``event: <kind>`` with the JSON of :meth:`Event.to_dict`; the turn
ends with ``event: result`` (the same JSON as the non-streaming answer) or ``event: error``
(``{"error": ..., "status": ...}``). A client that disconnects cancels its turn.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict, is_dataclass
from typing import Any

from retinue.engine.config import RunOutput
from retinue.events import Event
from retinue.server.conversations import ConversationHost

__all__ = ["frame", "output_json", "stream_turn"]

ErrorMapper = Callable[[BaseException], tuple[int, str]]


def _jsonable(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    return str(value)


def frame(kind: str, data: dict[str, Any]) -> str:
    """One SSE frame."""
    return f"event: {kind}\ndata: {json.dumps(data, default=_jsonable)}\n\n"


def output_json(out: RunOutput) -> dict[str, Any]:
    """What a turn answers: the reply, why it stopped, its tokens and the tools it used."""
    return {
        "content": out.content,
        "stop_reason": out.stop_reason,
        "usage": asdict(out.usage),
        "tools_used": out.tools_used,
    }


async def stream_turn(
    host: ConversationHost,
    cid: str,
    text: str,
    *,
    keep_sessions: bool,
    errors: ErrorMapper,
) -> AsyncIterator[str]:
    """Run one turn of ``cid`` and yield its events as they happen, then its result."""
    queue: asyncio.Queue[Event | None] = asyncio.Queue()
    turn = host.start(cid, text, keep_sessions=keep_sessions, on_event=queue.put_nowait)
    turn.add_done_callback(lambda _t: queue.put_nowait(None))
    try:
        while (event := await queue.get()) is not None:
            yield frame(event.kind, event.to_dict())
        if turn.cancelled():
            yield frame("error", {"error": "the turn was cancelled", "status": 409})
        elif (exc := turn.exception()) is not None:
            status, message = errors(exc)
            yield frame("error", {"error": message, "status": status})
        else:
            yield frame("result", output_json(turn.result()))
    finally:
        if not turn.done():  # the client went away
            turn.cancel()
