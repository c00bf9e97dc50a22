"""The conversation workflow: the history as state, one turn per ``send`` Update.

Deterministic: no I/O, no clock, no randomness. It asks the model through an activity, reads
the step from the reply (:func:`retinue.engine.loop.next_step`'s rule: tool calls run, an
answer ends the turn), runs each tool call as an activity, and appends what comes back.
Turns run one at a time. Between turns, past its :class:`~retinue.temporal._types.Limits`
(or when the server suggests it), the run continues as new with the history.
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from retinue.engine.loop import close_pending_calls
    from retinue.messages import AssistantMessage, ToolCall, UserMessage, from_dict, to_dict
    from retinue.temporal._types import (
        MODEL_ACTIVITY,
        TOOL_ACTIVITY,
        WORKFLOW_NAME,
        ConversationStart,
        Json,
        ModelReply,
        ModelStep,
        ToolStep,
        TurnReply,
    )

__all__ = ["ConversationWorkflow", "stopped_note"]


def _retry(attempts: int) -> RetryPolicy:
    # (a retried tool call that may have run is answered "cut short" by the activity itself)
    return RetryPolicy(maximum_attempts=attempts, initial_interval=timedelta(seconds=1))


def _call_dict(call: ToolCall) -> Json:
    return {"id": call.id, "name": call.name, "arguments": call.arguments}


def stopped_note(limit: int) -> str:
    return (
        f"Stopped: the agent made {limit} model calls without a final answer "
        f"(max_iterations={limit})."
    )


@workflow.defn(name=WORKFLOW_NAME)
class ConversationWorkflow:
    @workflow.init
    def __init__(self, start: ConversationStart) -> None:
        self._start = start
        self._messages: list[Json] = list(start.messages)
        self._step = start.step
        self._turn = asyncio.Lock()
        self._closed = False
        self._last_input = 0  # the last model call's input tokens (AutoCompress's estimate)

    @workflow.run
    async def run(self, start: ConversationStart) -> list[Json]:
        """Live until closed; continue as new when the history has grown past its bound."""
        await workflow.wait_condition(
            lambda: self._closed or (not self._turn.locked() and self._too_long())
        )
        await workflow.wait_condition(workflow.all_handlers_finished)
        if self._closed:
            return self._messages
        workflow.continue_as_new(
            ConversationStart(
                start.tenant, start.conversation_id, self._messages, self._step, start.limits
            )
        )

    def _too_long(self) -> bool:
        info, limits = workflow.info(), self._start.limits
        return (
            info.get_current_history_length() >= limits.max_events
            or info.get_current_history_size() >= limits.max_history_bytes
            or info.is_continue_as_new_suggested()
        )

    @workflow.update
    async def send(self, text: str) -> TurnReply:
        """Run one turn on the user message ``text``; its answer is the reply."""
        async with self._turn:
            self._messages.append(to_dict(UserMessage(text)))
            try:
                return await self._run_turn()
            except (ActivityError, ApplicationError) as exc:  # (retries spent; too long)
                cause = exc.cause if isinstance(exc, ActivityError) else None
                why = f"Stopped: {cause or exc}"
                self._close_turn(why)
                raise ApplicationError(why, non_retryable=True) from exc

    def _close_turn(self, note: str) -> None:
        """End a failed turn as an interrupted one ends: every call answered, then ``note``."""
        messages = [from_dict(m) for m in self._messages]
        before = len(messages)
        close_pending_calls(messages)
        self._messages.extend(to_dict(m) for m in messages[before:])
        self._messages.append(to_dict(AssistantMessage(note)))

    @send.validator
    def _check_send(self, text: str) -> None:
        if self._closed:
            raise ValueError("the conversation is closed")
        if not text.strip():
            raise ValueError("the message is empty")
        if len(text) > self._start.limits.max_message_chars:
            raise ValueError(f"the message is over {self._start.limits.max_message_chars} chars")

    @workflow.query
    def history(self) -> list[Json]:
        return self._messages

    @workflow.query
    def steps(self) -> int:
        return self._step

    @workflow.signal
    def close(self) -> None:
        self._closed = True

    async def _run_turn(self) -> TurnReply:
        limits = self._start.limits
        for _ in range(limits.max_iterations):
            message = await self._ask_model()
            if not message.tool_calls:
                return TurnReply(message.content, "final", self._step)
            self._step += 1
            ids = [c.id for c in message.tool_calls]
            unique = len(set(ids)) == len(ids) and all(ids)  # (else the index tells them apart)
            results = await asyncio.gather(
                *(
                    self._run_tool(c.id if unique else f"{i}:{c.id}", c)
                    for i, c in enumerate(message.tool_calls)
                )
            )
            self._messages.extend(results)
        note = stopped_note(limits.max_iterations)
        self._messages.append(to_dict(AssistantMessage(note)))
        return TurnReply(note, "max_iterations", self._step)

    async def _ask_model(self) -> AssistantMessage:
        self._step += 1
        start, limits = self._start, self._start.limits
        size = len(json.dumps(self._messages))  # (the whole history goes to the activity)
        if size > limits.max_payload_bytes:
            raise ApplicationError(
                f"the conversation's history is {size} bytes, over the {limits.max_payload_bytes}"
                " one Temporal payload may carry here (2 MB at most): start a new conversation"
            )
        reply = await workflow.execute_activity(
            MODEL_ACTIVITY,
            ModelStep(
                self._key(),
                start.tenant,
                start.conversation_id,
                list(self._messages),
                self._last_input,
            ),
            result_type=ModelReply,
            activity_id=self._key(),
            start_to_close_timeout=timedelta(seconds=limits.model_timeout_s),
            heartbeat_timeout=timedelta(seconds=limits.heartbeat_s),
            retry_policy=_retry(limits.model_attempts),
        )
        message = from_dict(reply.message)
        if not isinstance(message, AssistantMessage):
            raise ApplicationError(f"the model activity returned a {message.role} message")
        if reply.history is not None:  # AutoCompress shortened it
            self._messages[:] = reply.history
        self._last_input = reply.input_tokens
        self._messages.append(reply.message)
        return message

    async def _run_tool(self, key_id: str, call: ToolCall) -> Json:
        start, limits = self._start, self._start.limits
        key = self._key(key_id)
        return await workflow.execute_activity(
            TOOL_ACTIVITY,
            ToolStep(key, start.tenant, start.conversation_id, _call_dict(call)),
            result_type=dict,
            activity_id=key,
            start_to_close_timeout=timedelta(seconds=limits.tool_timeout_s),
            heartbeat_timeout=timedelta(seconds=limits.heartbeat_s),
            retry_policy=_retry(limits.tool_attempts),
        )

    def _key(self, call_id: str = "") -> str:
        """The idempotency key of this step (and call): unique in the conversation, across
        runs that continued as new."""
        base = f"{workflow.info().workflow_id}/{self._step}"
        return f"{base}/{call_id}" if call_id else base
