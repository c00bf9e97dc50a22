"""The client side of MCP Tasks (``io.modelcontextprotocol/tasks``, 2026-07-28): a
:class:`TasksClient` given to the SDK's ``Client(extensions=[...])`` declares the extension,
and a ``tools/call`` the server answers with a task (``resultType: "task"``) is finished
here: ``tasks/get`` is polled until the task ends, a question it asks
(``input_required``) is answered by ``answer`` through ``tasks/update``, and the inlined
result is the call's result, so the caller sees an ordinary ``CallToolResult``.

A task that fails, is cancelled or outlives ``MAX_WAIT_S`` is a tool error saying so; a
task the caller stops waiting for (its await cancelled) is cancelled on the server."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import Any, Literal

from mcp import types
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "TASKS",
    "Ack",
    "Answerer",
    "DetailedTask",
    "TaskCancel",
    "TaskGet",
    "TaskParams",
    "TaskUpdate",
    "TaskUpdateParams",
    "TasksClient",
]

TASKS = "io.modelcontextprotocol/tasks"
MAX_WAIT_S = 3600.0  # the longest a task is waited for
MIN_POLL_S, MAX_POLL_S = 0.05, 5.0  # the server's pollIntervalMs, kept within these
TERMINAL = frozenset({"completed", "failed", "cancelled"})

Answerer = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
"""Answers a task's input requests (by key, as JSON) with responses (by key)."""


async def decline(requests: dict[str, Any]) -> dict[str, Any]:
    """Answer every input request with a decline (nobody to ask)."""
    return {key: {"action": "decline"} for key in requests}


class CreateTaskResult(types.Result):
    """What a server answers a call it runs as a task with."""

    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"]
    task_id: str = Field(max_length=200)
    status: str = ""
    poll_interval_ms: int | None = None


class TaskParams(types.RequestParams):
    task_id: str = Field(max_length=200)


class TaskUpdateParams(TaskParams):
    input_responses: dict[str, Any]


class TaskGet(types.Request[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    name_param = "taskId"  # the Mcp-Name header the tasks/* methods carry


class TaskUpdate(types.Request[TaskUpdateParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    name_param = "taskId"


class TaskCancel(types.Request[TaskParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    name_param = "taskId"


class DetailedTask(BaseModel):
    """A task as ``tasks/get`` shows it."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    status: str
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, Any] | None = Field(default=None, alias="inputRequests")
    status_message: str | None = Field(default=None, alias="statusMessage")


class Ack(BaseModel):
    model_config = ConfigDict(extra="allow")


class TasksClient(ClientExtension):
    """Declares Tasks and finishes the tasks the server makes (see the module)."""

    identifier = TASKS

    def __init__(self, answer: Answerer = decline) -> None:
        self.answer = answer

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreateTaskResult, resolve=self._finish)]

    async def _finish(self, created: CreateTaskResult, ctx: ClaimContext) -> types.CallToolResult:
        session, tid = ctx.session, created.task_id
        poll = min(max((created.poll_interval_ms or 1000) / 1000, MIN_POLL_S), MAX_POLL_S)
        deadline = time.monotonic() + MAX_WAIT_S
        try:
            while time.monotonic() < deadline:
                task = await session.send_request(TaskGet(params=TaskParams(task_id=tid)),
                                                  DetailedTask)  # fmt: skip
                if task.status in TERMINAL:
                    return _ended(tid, task)
                if task.status == "input_required" and task.input_requests:
                    responses = await self.answer(task.input_requests)
                    update = TaskUpdateParams(task_id=tid, input_responses=responses)
                    await session.send_request(TaskUpdate(params=update), Ack)
                    continue
                await asyncio.sleep(poll)
        except asyncio.CancelledError:
            with suppress(Exception):  # best effort: the server may be gone
                await asyncio.shield(session.send_request(
                    TaskCancel(params=TaskParams(task_id=tid)), Ack))  # fmt: skip
            raise
        return _error(f"task {tid} did not end within {MAX_WAIT_S:.0f} s")


def _ended(tid: str, task: DetailedTask) -> types.CallToolResult:
    if task.status == "completed" and task.result is not None:
        return types.CallToolResult.model_validate(task.result)
    if task.status == "failed":
        message = (task.error or {}).get("message", "")
        return _error(f"task {tid} failed: {str(message)[:500]}")
    return _error(f"task {tid} was {task.status}")


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)
