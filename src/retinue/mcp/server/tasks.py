"""MCP Tasks (the ``io.modelcontextprotocol/tasks`` extension of 2026-07-28, SEP-2663) for
``retinue mcp serve``: a ``SubAgent`` call, which can run for minutes, becomes a task that
the client polls instead of a request held open.

Only where the client declares the extension (in the request's client capabilities) does
the server answer ``SubAgent`` with a ``CreateTaskResult`` (``resultType: "task"``, the
task's id, status and times, at the top level). The client then:

- ``tasks/get``: the task's status, ``working``, ``input_required`` (with the
  ``inputRequests`` the sub-agent's question makes), ``completed`` (with the tool's result
  inlined: a Retinue error is a completed task whose result ``isError``), ``failed`` (a
  protocol-level error, inlined as ``error``) or ``cancelled``;
- ``tasks/update`` with ``inputResponses``: the answer, which continues the same turn;
- ``tasks/cancel``: interrupts the sub-agent's turn; the task reads ``cancelled``.

Each client (each token over HTTP) sees only its own tasks: another's id is unknown
(-32602). Without the declared extension the ``tasks/*`` methods answer -32021 and
``SubAgent`` runs as it always did. A task is kept ``TTL_MS`` after its creation (a question
unanswered that long is declined), at most ``MAX_TASKS`` per client. What a task runs is
given by the server (:data:`Work`), so this module knows the protocol, not Retinue's
tools. While a task works, its ``statusMessage`` is its latest progress, in short.

The same :class:`TaskBook` serves protocol 2025-11-25's tasks (see
:mod:`retinue.mcp.server.tasks_2025`): a task is started with its TTL, whether its client
can be asked at all, and a :class:`Listener` that hears its status changes and progress."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from mcp import types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver.server import require_client_extension
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, CallToolRequestParams
from mcp_types.version import is_version_at_least
from pydantic import Field

from retinue._tasks import cancel_and_wait
from retinue.server.tokens import Principal

__all__ = [
    "TASKS",
    "TERMINAL",
    "Asker",
    "Listener",
    "Reporter",
    "TaskBook",
    "TaskRun",
    "TasksExtension",
    "Work",
]

TASKS = "io.modelcontextprotocol/tasks"
TTL_MS = 3_600_000  # how long a task stays readable after its creation
POLL_MS = 1_000  # the poll interval suggested to the client
MAX_TASKS = 64  # tasks one client holds at once (finished ones until their TTL)

log = logging.getLogger("retinue.server")

NOTE_CHARS = 200  # a task's statusMessage while it works (its latest progress, in short)

Status = Literal["working", "input_required", "completed", "failed", "cancelled"]
TERMINAL: frozenset[str] = frozenset({"completed", "failed", "cancelled"})
Asker = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
"""Asks the client: input requests (by key) in, the client's responses (by key) out."""
Reporter = Callable[[str, str], Awaitable[None]]
"""Tells how a task goes: a one-line summary (the task's ``statusMessage`` while it works)
and the detail (a progress notification's message, where the client asked for progress)."""
Work = Callable[
    [Principal | None, dict[str, Any], Asker, Reporter], Awaitable[types.CallToolResult]
]
"""What a task runs: the caller, the tool's arguments, how to ask the client, and how to
report progress."""
Caller = Callable[[ServerRequestContext[Any, Any]], Principal | None]
"""Who makes a request (the token's principal over HTTP, None on stdio)."""


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


class Listener:
    """Hears one task on behalf of the protocol that made it (the base hears nothing): each
    status change, and each progress message."""

    async def status(self, run: TaskRun) -> None:
        """The task's status changed (it is ``run.status`` now)."""

    async def progress(self, run: TaskRun, message: str) -> None:
        """The task's work reported ``message``."""


@dataclass
class TaskRun:
    """One task: its state as ``tasks/get`` shows it, and the job that runs it."""

    id: str
    owner: tuple[str | None, str | None]
    created: str = field(default_factory=_now)
    updated: str = ""
    status: Status = "working"
    note: str | None = None  # the latest progress, in short, while it works
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    asking: dict[str, Any] | None = None  # the pending input requests, by key
    answers: asyncio.Future[dict[str, Any]] | None = None  # resolved once all are answered
    received: dict[str, Any] = field(default_factory=dict[str, Any])
    job: asyncio.Task[None] | None = None
    ttl_ms: int = TTL_MS
    can_ask: bool = True  # False: its questions are declined at once (the client cannot answer)
    listener: Listener = field(default_factory=Listener)
    changed: asyncio.Event = field(default_factory=asyncio.Event)  # set at the next change

    def __post_init__(self) -> None:
        self.updated = self.updated or self.created

    def set(self, status: Status) -> None:
        self.status, self.updated = status, _now()
        if status != "working":
            self.note = None  # (the progress of its work, while it works)
        self.changed.set()  # wakes whoever waits for this change; the next gets a new event
        self.changed = asyncio.Event()

    def envelope(self) -> dict[str, Any]:
        """The task's fields as a ``CreateTaskResult`` carries them (no result yet)."""
        found = {"taskId": self.id, "status": self.status, "createdAt": self.created,
                 "lastUpdatedAt": self.updated, "ttlMs": self.ttl_ms,
                 "pollIntervalMs": POLL_MS}  # fmt: skip
        if self.note:
            found["statusMessage"] = self.note
        return found

    def detailed(self) -> dict[str, Any]:
        """The task as ``tasks/get`` returns it: its result, error or questions inlined."""
        found = self.envelope()
        if self.status == "completed" and self.result is not None:
            found["result"] = self.result
        elif self.status == "failed" and self.error is not None:
            found["error"] = self.error
        elif self.status == "input_required" and self.asking:
            found["inputRequests"] = self.asking
        return found

    def expired(self) -> bool:
        age = datetime.now(UTC) - datetime.fromisoformat(self.created.replace("Z", "+00:00"))
        return (self.job is not None and self.job.done()
                and age.total_seconds() * 1000 > self.ttl_ms)  # fmt: skip


class TaskBook:
    """The tasks of every client, each running :data:`Work` in a job of its own."""

    def __init__(self, work: Work) -> None:
        self.work = work
        self._tasks: dict[str, TaskRun] = {}

    def start(self, principal: Principal | None, arguments: dict[str, Any], *,
              ttl_ms: int = TTL_MS, can_ask: bool = True,
              listener: Listener | None = None) -> TaskRun:  # fmt: skip
        """A new task of ``principal`` running ``arguments``, kept ``ttl_ms`` (at most
        ``TTL_MS``), heard by ``listener``; readable as soon as returned."""
        owner = _owner(principal)
        for tid in [t.id for t in self._tasks.values() if t.expired()]:
            del self._tasks[tid]
        if sum(t.owner == owner for t in self._tasks.values()) >= MAX_TASKS:
            raise MCPError(INVALID_PARAMS, f"at most {MAX_TASKS} tasks at once: wait for some")
        run = TaskRun(id=uuid.uuid4().hex, owner=owner, ttl_ms=min(ttl_ms, TTL_MS),
                      can_ask=can_ask, listener=listener or Listener())  # fmt: skip
        self._tasks[run.id] = run
        run.job = asyncio.create_task(self._run(run, principal, arguments))
        return run

    def owned_by(self, principal: Principal | None) -> list[TaskRun]:
        """The tasks of ``principal`` still kept, oldest first: each that :meth:`of` finds
        (one past its TTL too, until the next :meth:`start` lets it go)."""
        owner = _owner(principal)
        return [t for t in self._tasks.values() if t.owner == owner]

    def of(self, principal: Principal | None, task_id: object) -> TaskRun:
        run = self._tasks.get(task_id) if isinstance(task_id, str) else None
        if run is None or run.owner != _owner(principal):  # another's task is unknown here
            raise MCPError(INVALID_PARAMS, f"unknown task {str(task_id)[:100]!r}")
        return run

    def update(self, run: TaskRun, responses: dict[str, Any]) -> None:
        """Deliver the client's answers; the task goes on once each question has one."""
        if run.status != "input_required" or run.asking is None or run.answers is None:
            return
        for key in set(responses) & set(run.asking):
            run.received[key] = responses[key]
            del run.asking[key]
        if not run.asking and not run.answers.done():
            run.answers.set_result(dict(run.received))

    async def cancel(self, run: TaskRun) -> None:
        """Interrupt a running task (its job, and so the sub-agent's turn); a finished one
        stays as it ended."""
        if run.job is None or run.job.done():
            return
        await cancel_and_wait(run.job)
        await self._set(run, "cancelled")

    async def close(self) -> None:
        """Cancel every task still running (the server stops)."""
        for run in list(self._tasks.values()):
            await self.cancel(run)

    async def _run(self, run: TaskRun, principal: Principal | None, arguments: dict[str, Any]
                   ) -> None:  # fmt: skip
        async def ask(requests: dict[str, Any]) -> dict[str, Any]:
            if not run.can_ask:
                return {}  # declined: the work goes on as with a client that says no
            run.answers = asyncio.get_running_loop().create_future()
            run.asking, run.received = dict(requests), {}
            await self._set(run, "input_required")
            try:  # a client that never answers: declined when the task's TTL is over
                answers = await asyncio.wait_for(run.answers, run.ttl_ms / 1000)
            except TimeoutError:
                answers = {}
            finally:
                run.asking, run.answers = None, None
            await self._set(run, "working")
            return answers

        async def report(summary: str, detail: str) -> None:
            run.note = summary[:NOTE_CHARS] or None
            await run.listener.progress(run, detail)

        try:
            result = await self.work(principal, arguments, ask, report)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a protocol-level failure: the task failed, the server goes on
            log.error("MCP task %s failed", run.id, exc_info=True)
            run.error = {
                "code": INTERNAL_ERROR,
                "message": f"internal error ({type(exc).__name__}); the server's log has more",
            }
            await self._set(run, "failed")
            return
        run.result = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        await self._set(run, "completed")

    async def _set(self, run: TaskRun, status: Status) -> None:
        """Record the task's new status, then tell its listener (a failing one is not the
        task's failure)."""
        run.set(status)
        with suppress(Exception):
            await run.listener.status(run)


def _owner(principal: Principal | None) -> tuple[str | None, str | None]:
    who = principal or Principal()
    return (who.name, who.tenant)


class TaskParams(types.RequestParams):
    task_id: str = Field(max_length=200)


class TaskUpdateParams(TaskParams):
    input_responses: dict[str, Any] = Field(default_factory=dict[str, Any])


class TasksExtension(Extension):
    """The Tasks extension: ``tools`` (by name) become tasks for a client that declares it.

    ``principal`` reads the caller of a request (None on stdio)."""

    identifier = TASKS

    def __init__(self, book: TaskBook, tools: set[str], principal: Caller) -> None:
        self.book = book
        self.task_tools = tools
        self.principal = principal

    def methods(self) -> Sequence[MethodBinding]:
        modern = frozenset({"2026-07-28"})
        return (
            MethodBinding("tasks/get", TaskParams, self._get, modern),
            MethodBinding("tasks/update", TaskUpdateParams, self._update, modern),
            MethodBinding("tasks/cancel", TaskParams, self._cancel, modern),
        )

    async def intercept_tool_call(self, params: CallToolRequestParams,
                                  ctx: ServerRequestContext[Any, Any],
                                  call_next: CallNext) -> HandlerResult:  # fmt: skip
        if params.name not in self.task_tools or not _declares_tasks(ctx):
            return await call_next(ctx)  # as before: the call runs within its request
        run = self.book.start(self.principal(ctx), dict(params.arguments or {}))
        return {"resultType": "task", **run.envelope()}

    async def _get(self, ctx: ServerRequestContext[Any, Any], params: Any) -> HandlerResult:
        require_client_extension(ctx, TASKS)
        return self.book.of(self.principal(ctx), params.task_id).detailed()

    async def _update(self, ctx: ServerRequestContext[Any, Any], params: Any) -> HandlerResult:
        require_client_extension(ctx, TASKS)
        self.book.update(self.book.of(self.principal(ctx), params.task_id),
                         params.input_responses)  # fmt: skip
        return {}

    async def _cancel(self, ctx: ServerRequestContext[Any, Any], params: Any) -> HandlerResult:
        require_client_extension(ctx, TASKS)
        await self.book.cancel(self.book.of(self.principal(ctx), params.task_id))
        return {}


def _declares_tasks(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether the call came at 2026-07-28 or later from a client declaring Tasks."""
    if not is_version_at_least(ctx.protocol_version, "2026-07-28"):
        return False
    capabilities = ctx.session.client_capabilities
    return bool(capabilities and capabilities.extensions and TASKS in capabilities.extensions)
