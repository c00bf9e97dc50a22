"""The values that cross Temporal's boundary: workflow input, activity requests, replies.

Plain dataclasses of JSON data (Temporal's default converter), kept apart from the workflow
and the activities so that both import them and the workflow's sandbox imports nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "MODEL_ACTIVITY",
    "TOOL_ACTIVITY",
    "WORKFLOW_NAME",
    "ConversationStart",
    "Limits",
    "ModelReply",
    "ModelStep",
    "ToolStep",
    "TurnReply",
]

WORKFLOW_NAME = "RetinueConversation"
MODEL_ACTIVITY = "retinue.model_call"
TOOL_ACTIVITY = "retinue.tool_call"

Json = dict[str, Any]


@dataclass(slots=True)
class Limits:
    """What a conversation workflow is held to. Temporal allows about 51,200 events and
    50 MB of history per run and 2 MB per payload; a run continues as new past
    ``max_events`` or ``max_history_bytes`` (or when the server suggests it)."""

    max_iterations: int = 50  # model calls in one turn
    max_events: int = 10_000
    max_history_bytes: int = 20_000_000
    max_message_chars: int = 1_000_000  # a user message (one payload holds 2 MB)
    # the history rides in every model call's payload (by reference: a follow-up)
    max_payload_bytes: int = 1_800_000
    model_timeout_s: float = 600.0  # one model call, every attempt
    tool_timeout_s: float = 3600.0  # one tool call
    heartbeat_s: float = 30.0  # a worker that has not beaten for this long is dead
    model_attempts: int = 5  # tries of one model call (then the turn fails, history kept)
    tool_attempts: int = 3  # tries of one tool call activity


@dataclass(slots=True)
class ConversationStart:
    """A conversation workflow's input; a run that continues as new passes on its state."""

    tenant: str
    conversation_id: str
    messages: list[Json] = field(default_factory=list)  # retinue.messages.to_dict form
    step: int = 0  # steps taken so far (model calls and tool steps): the keys go on counting
    limits: Limits = field(default_factory=Limits)


@dataclass(slots=True)
class ModelStep:
    key: str  # workflow id / step: the idempotency key
    tenant: str
    conversation_id: str
    messages: list[Json]
    last_input_tokens: int = 0  # the previous call's, for AutoCompress's estimate


@dataclass(slots=True)
class ModelReply:
    message: Json
    input_tokens: int = 0
    output_tokens: int = 0
    history: list[Json] | None = None  # the history AutoCompress shortened, if it did


@dataclass(slots=True)
class ToolStep:
    key: str  # workflow id / step / call id: the idempotency key
    tenant: str
    conversation_id: str
    call: Json  # {"id", "name", "arguments"}


@dataclass(slots=True)
class TurnReply:
    content: str
    stop_reason: str  # "final" or "max_iterations"
    step: int
