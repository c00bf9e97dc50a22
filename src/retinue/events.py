"""Progress events: what every agent, model call, tool call and session is doing.

Events flow to an :data:`EventSink` (a plain callable) carried on the tool context, so a
sub-agent's events reach the same sink as its parent's. The CLI renders them as a live tree,
the HTTP service streams them over SSE, and a tracer can record them. A sink must be quick
and must not raise; :func:`emit` shields the run from a broken one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Event", "EventSink", "emit"]

log = logging.getLogger("retinue.events")

# Kinds, grouped by who emits them.
RUN_STARTED = "run_started"  # data: role, parent_id, depth
RUN_FINISHED = "run_finished"  # data: stop_reason, usage | role, output (a typed answer, JSON)
TEXT_DELTA = "text_delta"  # data: text
MODEL_STARTED = "model_started"  # data: model
MODEL_CALLED = "model_called"  # data: input_tokens, output_tokens, seconds | purpose
# | model, fallback_from (a fallback model answered: retinue.llm.fallback)
TOOL_STARTED = "tool_started"  # data: call_id, name, arguments
TOOL_FINISHED = "tool_finished"  # data: call_id, name, is_error, preview
SESSION = "session"  # data: action (created/paused/unloaded/interrupted/asking/answered/steered),
# conversation_id; "asking" carries the question
COMPRESSED = "compressed"  # data: before/after_tokens, removed_messages, reason, ok
CONSOLIDATED = "consolidated"  # data: role, session_id, ok, error
NOTICE = "notice"  # data: text (something the user should know once, e.g. a model fallback)


@dataclass(frozen=True, slots=True)
class Event:
    kind: str
    agent_id: str
    data: dict[str, Any] = field(default_factory=dict)
    at: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "agent_id": self.agent_id, "at": self.at, **self.data}


EventSink = Callable[[Event], None]


def emit(sink: EventSink | None, kind: str, agent_id: str, **data: Any) -> None:
    """Deliver one event to ``sink`` if there is one; a failing sink is logged, not raised."""
    if sink is None:
        return
    try:
        sink(Event(kind, agent_id, data))
    except Exception:
        log.exception("event sink failed on %s", kind)
