"""The activities of a conversation workflow: one model call, one tool call.

They run on a worker's :class:`~retinue.runtime.Runtime` (the model, the tools, the roles,
the memory, the policy), as the main agent of conversation ``conversation_id`` would run
them in a ``retinue run``. Activities run at least once: each knows its idempotency key
(:func:`idempotency_key`, for a tool that talks to another system), and a retried call of a
tool that is not ``idempotent`` (its worker died, or was stopped, while it ran) is not run
again: the model is told it was cut short, as a restarted durable session tells it
(:data:`~retinue.durable.revive.RESTARTED_RESULT`). AutoCompress runs before each model
call, and the history it shortened goes back to the workflow. A sub-agent session a call
opens (``SubAgent``, interactive or not) ends with that call, its memory consolidated: in
this first slice interactive sessions are not yet child workflows that live across turns.
While a call runs, the activity beats (Temporal's heartbeat), so a dead worker's call is
retried after ``Limits.heartbeat_s``.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError

from retinue.durable.revive import RESTARTED_RESULT
from retinue.messages import SystemMessage, ToolCall, ToolResultMessage, from_dict, to_dict
from retinue.runtime import Conversation, Runtime
from retinue.temporal._types import (
    MODEL_ACTIVITY,
    TOOL_ACTIVITY,
    Json,
    ModelReply,
    ModelStep,
    ToolStep,
)

__all__ = ["TurnActivities", "idempotency_key"]

T = TypeVar("T")

_key: contextvars.ContextVar[str] = contextvars.ContextVar("retinue_temporal_key", default="")


def idempotency_key() -> str:
    """The running activity's idempotency key (``workflow id/step[/call id]``), or ``""``
    outside one: the same on every attempt of one call, different for every other call."""
    return _key.get()


class TurnActivities:
    """The activities a worker registers, bound to its runtime."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def activities(self) -> list[Callable[..., Any]]:
        return [self.model_call, self.tool_call]

    def _conversation(self, tenant: str, conversation_id: str) -> Conversation:
        if tenant != self.runtime.settings.tenant:  # (one worker, one tenant's memory)
            raise ApplicationError(
                f"this worker serves tenant {self.runtime.settings.tenant!r}, not {tenant!r}",
                non_retryable=True,
            )
        return self.runtime.conversation(conversation_id)

    @activity.defn(name=MODEL_ACTIVITY)
    async def model_call(self, request: ModelStep) -> ModelReply:
        _key.set(request.key)
        conversation = self._conversation(request.tenant, request.conversation_id)
        config = conversation.session.config
        await config.tools.refresh(config.context)
        history = [from_dict(m) for m in request.messages]
        sent = [SystemMessage(await conversation.system_prompt()), *history]
        keeper = config.context_keeper  # AutoCompress, as a session's turn runs it
        if keeper is not None:
            await keeper.before_call(sent, config.model, config.context, request.last_input_tokens)
        specs = config.tools.specs()
        response = await _beating(config.model.complete(sent, specs))
        usage = response.usage
        kept = sent[1:]
        shortened = len(kept) != len(history) or any(
            a is not b for a, b in zip(kept, history, strict=True)
        )
        return ModelReply(
            to_dict(response.message), usage.input_tokens, usage.output_tokens,
            [to_dict(m) for m in kept] if shortened else None,
        )  # fmt: skip

    @activity.defn(name=TOOL_ACTIVITY)
    async def tool_call(self, request: ToolStep) -> Json:
        _key.set(request.key)
        call = ToolCall(
            str(request.call["id"]), str(request.call["name"]), str(request.call["arguments"])
        )
        conversation = self._conversation(request.tenant, request.conversation_id)
        config = conversation.session.config
        tool = config.tools.get(call.name)
        if activity.info().attempt > 1 and not (tool is not None and tool.idempotent):
            return to_dict(ToolResultMessage(call.id, call.name, RESTARTED_RESULT, True))
        gate, ctx = config.context.gate, config.context
        running = (
            gate.execute(config.tools, call, ctx)
            if gate is not None
            else config.tools.execute(call, ctx)
        )
        try:
            return to_dict(await _beating(running))
        finally:  # sessions it opened end with the call (not yet child workflows): closed and
            await self.runtime.manager.cleanup(request.conversation_id)  # consolidated here


async def _beating(work: Awaitable[T]) -> T:
    """Await ``work`` while beating a few times per heartbeat timeout; a cancelled activity
    cancels it."""
    task = asyncio.ensure_future(work)
    timeout = activity.info().heartbeat_timeout
    every = timeout.total_seconds() / 3 if timeout else 10.0
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=every)
            if done:
                return task.result()
            activity.heartbeat()
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
