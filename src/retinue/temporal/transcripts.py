"""The transcript of a session that ran as a workflow (the main agent's, or a sub-agent
session's), kept when it closes.

In process, a session's close keeps its transcript (:mod:`retinue.engine.transcripts`). On
Temporal a sub-agent session's workflow closes with one activity, its consolidation
(:meth:`~retinue.temporal.activities.TurnActivities.consolidate`), and that activity keeps the
transcript first; the main agent's close, and a session's closed before its first turn,
run one that keeps it alone (:meth:`~retinue.temporal.activities.TurnActivities.keep`).
Each keeps it from what its step carries: the history (its stubs read back from the
store first, so the transcript holds the content, not the notes) and the agent (id, role,
parent, depth, kind), in the same :class:`~retinue.store.transcripts.TranscriptStore` and
the same summary as in process, with the session ids the worker's agents use
(``CID/researcher#1``, its parent ``CID``), so a parent's ``ReadTranscript`` on a worker
finds its children's. A front end shows them as the service names them (``conv-CID/...``).

It is kept under an id made from the session's first run id (:func:`run_transcript_id`),
and a store keeps an id once: an activity tried again keeps one transcript. Keeping never
fails the close (a store that is down is logged, as in process). Its tokens, requests and
cost are what the workflow added up of its model calls (``ConsolidateStep.spent``, every
run's; a cost is None when a model's price is unknown); ``turns`` counts the
messages that began one (a user's message, a question's answer) in the history as it
ended, which AutoCompress may have shortened; ``started_at`` is the workflow's start, as
Temporal says it (the close's time where it cannot); a session whose last turn failed
(``ConsolidateStep.failed``: the workflow says so) reads as ``failed``.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Sequence

from temporalio import activity
from temporalio.service import RPCError

from retinue.engine.pause import ASK_TOOL_NAME
from retinue.engine.transcripts import TranscriptKeeper
from retinue.messages import AssistantMessage, Message, ToolResultMessage, UserMessage
from retinue.store.transcripts import (
    TranscriptSummary,
    entries_of,
    tool_call_count,
)
from retinue.temporal._types import Agent, ConsolidateStep
from retinue.temporal.workflow import INTERRUPTED_NOTE
from retinue.tools.base import ToolContext

__all__ = ["keep_transcript", "run_transcript_id", "session_outcome"]

log = logging.getLogger("retinue.transcripts")

CLOSED_NOTE = "Stopped: the session was closed while this turn ran."  # (the workflow's)


def run_transcript_id(tenant: str, run_id: str) -> str:
    """The transcript id of the session whose first run id is ``run_id``: the same on every
    try of its close, another for every other session (``t-`` and twelve hex digits)."""
    return "t-" + hashlib.sha256(f"{tenant}\n{run_id}".encode()).hexdigest()[:12]


def session_outcome(messages: Sequence[Message], failed: bool = False) -> str:
    """How a session's workflow ended, read from its history: ``asking`` (an ``AskParent``
    call without its answer), ``empty``, ``interrupted``, ``failed`` (its workflow says its
    last turn failed) or ``done``."""
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolResultMessage)}
    for m in messages:
        if isinstance(m, AssistantMessage) and any(
            c.name == ASK_TOOL_NAME and c.id not in answered for c in m.tool_calls
        ):
            return "asking"
    if not any(isinstance(m, UserMessage) for m in messages):
        return "empty"
    last = messages[-1]
    if isinstance(last, AssistantMessage) and last.content in (INTERRUPTED_NOTE, CLOSED_NOTE):
        return "interrupted"
    return "failed" if failed else "done"


def _turns(messages: Sequence[Message]) -> int:
    """The turns the history shows: its user messages and the answers to its questions."""
    return sum(
        isinstance(m, UserMessage)
        or (isinstance(m, ToolResultMessage) and m.name == ASK_TOOL_NAME and not m.is_error)
        for m in messages
    )


def _kind(agent: Agent) -> str:
    if not agent.chain:
        return "main"
    return "one-shot" if agent.one_shot else "interactive"


async def _started_at(run_id: str, otherwise: float) -> float:
    """When the session's workflow started (its first run), as Temporal says it."""
    workflow_id = activity.info().workflow_id
    try:
        client = activity.client()
    except RuntimeError:  # (no client: a test's activity environment)
        return otherwise
    if workflow_id is None:
        return otherwise
    try:
        described = await client.get_workflow_handle(workflow_id, run_id=run_id).describe()
    except RPCError:
        return otherwise
    return described.start_time.timestamp()


async def keep_transcript(
    keeper: TranscriptKeeper, step: ConsolidateStep, ctx: ToolContext, messages: list[Message]
) -> None:
    """Keep the transcript of the session ``step`` closes (``ctx``: its agent's context,
    ``messages``: its history in full); never raises an ``Exception``."""
    try:
        ended = time.time()
        agent, spent = step.agent, step.spent
        summary = TranscriptSummary(
            run_transcript_id(step.tenant, step.run_id), ctx.agent_id, ctx.parent_id,
            agent.role, _kind(agent), ctx.depth,
            _turns(messages), tool_call_count(messages), spent.input_tokens,
            spent.output_tokens, spent.cache_read_tokens, spent.requests, spent.cost_usd,
            session_outcome(messages, step.failed), await _started_at(step.run_id, ended), ended,
            len(messages),
        )  # fmt: skip
        await keeper.store.keep(step.tenant, summary, entries_of(messages))
    except Exception:
        log.warning("could not keep the transcript of %s", step.agent.agent_id, exc_info=True)
