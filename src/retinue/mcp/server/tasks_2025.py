"""MCP Tasks as protocol 2025-11-25 defines them (experimental, in the core spec), served
from the same :class:`~retinue.mcp.server.tasks.TaskBook` as the 2026-07-28 extension: a
2025-11-25 client gets these wire shapes, a 2026-07-28 client the extension's.

- ``initialize`` declares ``capabilities.tasks`` (``list``, ``cancel``,
  ``requests.tools.call``), and ``tools/list`` marks ``SubAgent`` with
  ``execution.taskSupport: "optional"``. Nothing of it is declared at other versions.
- ``tools/call`` with a ``task`` param (``ttl`` in ms, kept within 1 min and 1 h) answers
  ``CreateTaskResult`` (``{"task": {...}}``) at once; without one the call runs as always. A
  task for a tool that cannot be one is ``-32601``.
- ``tasks/get`` and ``tasks/list`` (``nextCursor`` pages) show the task: ``working``,
  ``input_required``, ``completed``, ``failed`` (the spec counts a tool result in error as a
  failed tool task: its ``statusMessage`` is the error), ``cancelled``. While it works its
  ``statusMessage`` is its latest progress, in short.
- ``tasks/result`` blocks until the task ends and returns the tool's result, with the
  ``io.modelcontextprotocol/related-task`` metadata; a task that failed with a protocol
  error returns that error, a cancelled one an error (-32602). While it blocks, a
  sub-agent's question (or an approval) is asked of the client through it: an
  ``elicitation/create`` request on its stream, related to the task; the answer continues
  the same turn. Of several ``tasks/result`` the newest asks (one before it may have lost its
  stream, which HTTP does not tell): the one asking gives way, its question unanswered. A
  client that does not declare elicitation is not asked: the question comes back in the
  result as ``[session … asks: …]``, as in a plain call.
- ``tasks/cancel`` interrupts the sub-agent's turn and returns the cancelled task; an ended
  task is ``-32602``.
- ``notifications/tasks/status`` goes to the client on each status change, and, where the
  ``tools/call`` carried a ``progressToken``, the sub-agent tree's events go as
  ``notifications/progress`` for that token (at most ``PROGRESS_BURST`` at once, then
  ``PROGRESS_RATE`` a second; the rest are left out), both on the connection's own channel
  (stdio; over HTTP the client's GET stream, where it opened one).

Each client (each token over HTTP) sees only its own tasks, at either version. At 2026-07-28
the extension defines no progress for tasks, and status notifications only on a
``tasks/get`` stream, which answers at once here: a 2026 client polls, and reads the
latest progress as the task's ``statusMessage``."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import replace
from typing import Any, cast

from mcp import types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import MethodBinding
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND
from pydantic import ValidationError

from retinue._tasks import cancel_and_wait
from retinue.mcp.server.tasks import (
    POLL_MS,
    TERMINAL,
    TTL_MS,
    Listener,
    TaskParams,
    TaskRun,
    TasksExtension,
)

__all__ = ["LEGACY", "RELATED_TASK", "BothTasks", "legacy_view"]

LEGACY = "2025-11-25"  # the one version whose core spec has tasks
RELATED_TASK = "io.modelcontextprotocol/related-task"
MIN_TTL_MS = 60_000  # a shorter ttl asked for is raised to this (a result must stay readable)
PAGE = 50  # tasks in one tasks/list page
PROGRESS_BURST, PROGRESS_RATE = 20, 5.0  # progress notifications of a task: burst, per second
PROGRESS_CHARS = 2_000  # a progress notification's message, at most
MESSAGE_CHARS = 500  # a task's statusMessage, at most
SEND_S = 5.0  # a notification the client does not take within this is dropped
CAPABILITY = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}


def legacy_view(run: TaskRun) -> dict[str, Any]:
    """The task as a 2025-11-25 ``Task``: a tool result in error is a ``failed`` task."""
    status, message = run.status, run.note
    if status == "completed" and run.result is not None and run.result.get("isError"):
        status, message = "failed", _text_of(run.result)
    elif status == "failed" and run.error is not None:
        message = str(run.error.get("message", ""))
    found: dict[str, Any] = {"taskId": run.id, "status": status, "createdAt": run.created,
                             "lastUpdatedAt": run.updated, "ttl": run.ttl_ms,
                             "pollInterval": POLL_MS}  # fmt: skip
    if message:
        found["statusMessage"] = message[:MESSAGE_CHARS]
    return found


def _text_of(result: dict[str, Any]) -> str:
    blocks = result.get("content")
    texts = [b.get("text", "") for b in blocks if isinstance(b, dict)] if isinstance(
        blocks, list) else []  # fmt: skip
    return " ".join(t for t in texts if isinstance(t, str))


class LegacyListener(Listener):
    """Tells a 2025-11-25 client how its task goes, on the connection's own channel: each
    status change, and (where it gave a progress token) progress, bounded in rate."""

    def __init__(self, session: ServerSession, token: str | int | None) -> None:
        self.session = session
        self.token = token
        self.sent = 0
        self.left_out = 0
        self._budget = float(PROGRESS_BURST)
        self._at = asyncio.get_running_loop().time()

    async def status(self, run: TaskRun) -> None:
        params = types.TaskStatusNotificationParams.model_validate(legacy_view(run))
        notification = types.TaskStatusNotification(params=params)  # (not in the SDK's union)
        await asyncio.wait_for(
            self.session.send_notification(cast(types.ServerNotification, notification)), SEND_S
        )

    async def progress(self, run: TaskRun, message: str) -> None:
        if self.token is None:
            return
        now = asyncio.get_running_loop().time()
        self._budget = min(PROGRESS_BURST, self._budget + (now - self._at) * PROGRESS_RATE)
        self._at = now
        if self._budget < 1:
            self.left_out += 1
            return
        self._budget -= 1
        self.sent += 1
        related = {RELATED_TASK: {"taskId": run.id}}  # (as every message of a task carries)
        params = types.ProgressNotificationParams.model_validate({"_meta": related,
            "progressToken": self.token, "progress": self.sent,
            "message": message[:PROGRESS_CHARS]})  # fmt: skip
        notification = types.ProgressNotification(params=params)
        await asyncio.wait_for(self.session.send_notification(notification), SEND_S)


class BothTasks(TasksExtension):
    """The Tasks extension (2026-07-28), which also serves 2025-11-25's core tasks from the
    same book. Give :meth:`middleware` to the server too: at 2025-11-25 it makes the
    task-augmented ``tools/call`` and declares the capability."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # by task: the tasks/result that asks its questions (the newest: one before it may
        # have lost its stream, which no error tells), set when a newer one takes over
        self._asker: dict[str, asyncio.Event] = {}

    def methods(self) -> tuple[MethodBinding, ...]:
        wider = {"tasks/get", "tasks/cancel"}  # served at both versions, in each one's shape
        legacy = frozenset({LEGACY})
        found = [replace(m, protocol_versions=(m.protocol_versions or frozenset()) | legacy)
                 if m.method in wider else m for m in super().methods()]  # fmt: skip
        return (
            *found,
            MethodBinding("tasks/result", TaskParams, self._result, legacy),
            MethodBinding("tasks/list", types.PaginatedRequestParams, self._list, legacy),
        )

    async def middleware(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
                         ) -> HandlerResult:  # fmt: skip
        params = ctx.params if isinstance(ctx.params, Mapping) else {}
        if (
            ctx.method == "tools/call"
            and ctx.protocol_version == LEGACY
            and (params.get("task") is not None and ctx.session.client_params is not None)
        ):
            return self._create(ctx, params)
        result = await call_next(ctx)
        if not isinstance(result, dict):
            return result
        if ctx.method == "initialize" and result.get("protocolVersion") == LEGACY:
            capabilities = result.setdefault("capabilities", {})
            if isinstance(capabilities, dict):
                capabilities["tasks"] = CAPABILITY
        elif ctx.method == "tools/list" and ctx.protocol_version == LEGACY:
            for tool in result.get("tools") or ():
                if isinstance(tool, dict) and tool.get("name") in self.task_tools:
                    tool["execution"] = {"taskSupport": "optional"}
        return result

    def _create(self, ctx: ServerRequestContext[Any, Any], raw: Mapping[str, Any]
                ) -> dict[str, Any]:  # fmt: skip
        try:
            params = types.CallToolRequestParams.model_validate(raw)
        except ValidationError:
            raise MCPError(INVALID_PARAMS, "invalid tools/call params") from None
        if params.name not in self.task_tools:
            raise MCPError(METHOD_NOT_FOUND, f"tool {params.name[:100]!r} does not run as a task")
        asked = params.task.ttl if params.task is not None else None
        ttl = TTL_MS if asked is None else min(max(asked, MIN_TTL_MS), TTL_MS)
        meta = raw.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, Mapping) else None
        valid = isinstance(token, int | str) and not isinstance(token, bool)
        valid = valid and len(str(token)) <= 200
        run = self.book.start(
            self.principal(ctx), dict(params.arguments or {}), ttl_ms=ttl,
            can_ask=_can_elicit(ctx.session),
            listener=LegacyListener(ctx.session, cast(str | int, token) if valid else None),
        )  # fmt: skip
        return {"task": legacy_view(run)}

    async def _get(self, ctx: ServerRequestContext[Any, Any], params: Any) -> HandlerResult:
        if ctx.protocol_version != LEGACY:
            return await super()._get(ctx, params)
        return legacy_view(self.book.of(self.principal(ctx), params.task_id))

    async def _cancel(self, ctx: ServerRequestContext[Any, Any], params: Any) -> HandlerResult:
        if ctx.protocol_version != LEGACY:
            return await super()._cancel(ctx, params)
        run = self.book.of(self.principal(ctx), params.task_id)
        if run.status in TERMINAL:
            ended = legacy_view(run)["status"]
            raise MCPError(INVALID_PARAMS, f"task {run.id} has ended ({ended}): nothing to cancel")
        await self.book.cancel(run)
        return legacy_view(run)

    async def _list(self, ctx: ServerRequestContext[Any, Any], params: Any) -> HandlerResult:
        tasks = self.book.owned_by(self.principal(ctx))
        start = _offset(params.cursor, len(tasks))
        found: dict[str, Any] = {"tasks": [legacy_view(t) for t in tasks[start : start + PAGE]]}
        if start + PAGE < len(tasks):
            found["nextCursor"] = str(start + PAGE)
        return found

    async def _result(self, ctx: ServerRequestContext[Any, Any], params: Any) -> HandlerResult:
        """Block until the task ends, asking the client its questions meanwhile."""
        run = self.book.of(self.principal(ctx), params.task_id)
        if (before := self._asker.get(run.id)) is not None:
            before.set()  # it gives way to this one
        self._asker[run.id] = mine = asyncio.Event()
        try:
            while run.status not in TERMINAL:
                changed = run.changed
                if run.status == "input_required" and run.asking:
                    if run.id not in self._asker:  # the newer one has gone: this one asks
                        self._asker[run.id] = mine = asyncio.Event()
                    if self._asker[run.id] is mine:
                        await self._ask(ctx, run, dict(run.asking), mine)
                with suppress(TimeoutError):  # (not answered: ask again in a while at most)
                    await asyncio.wait_for(changed.wait(), POLL_MS / 1000)
        finally:
            if self._asker.get(run.id) is mine:
                del self._asker[run.id]
        if run.status == "completed" and run.result is not None:
            found = {k: v for k, v in run.result.items() if k != "resultType"}  # (a 2026 field)
            meta = found.get("_meta")
            found["_meta"] = {**(meta if isinstance(meta, dict) else {}),
                              RELATED_TASK: {"taskId": run.id}}  # fmt: skip
            return found
        if run.status == "failed" and run.error is not None:
            raise MCPError(int(run.error.get("code", INTERNAL_ERROR)),
                           str(run.error.get("message", "the task failed")))  # fmt: skip
        raise MCPError(INVALID_PARAMS, f"task {run.id} was cancelled: it has no result")

    async def _ask(self, ctx: ServerRequestContext[Any, Any], run: TaskRun,
                   asking: dict[str, Any], displaced: asyncio.Event) -> None:  # fmt: skip
        """Ask the client, on this ``tasks/result`` stream, the task's pending questions,
        and give the task the answers (none if the task ends, or a newer ``tasks/result``
        takes over, first)."""
        answers = asyncio.ensure_future(
            asyncio.gather(*(self._elicit(ctx, run, r) for r in asking.values()))
        )
        ended = asyncio.ensure_future(_ended(run))
        gave_way = asyncio.ensure_future(displaced.wait())
        try:
            await asyncio.wait({answers, ended, gave_way}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await cancel_and_wait(answers, ended, gave_way)
        if answers.done() and not answers.cancelled() and answers.exception() is None:
            self.book.update(run, dict(zip(asking, answers.result(), strict=True)))

    async def _elicit(self, ctx: ServerRequestContext[Any, Any], run: TaskRun,
                      request: object) -> dict[str, Any]:  # fmt: skip
        """One question, related to the task; a client that fails to answer declines."""
        try:
            asked = types.ElicitRequest.model_validate(request)
            related = {RELATED_TASK: {"taskId": run.id}}
            asked = asked.model_copy(update={"params": asked.params.model_copy(
                update={"meta": related})})  # fmt: skip
            metadata = ServerMessageMetadata(related_request_id=ctx.request_id)
            result = await ctx.session.send_request(asked, types.ElicitResult, metadata=metadata)
        except (MCPError, ValidationError):
            return {"action": "cancel"}
        return result.model_dump(by_alias=True, mode="json", exclude_none=True)


def _offset(cursor: object, count: int) -> int:
    """Where a ``tasks/list`` cursor (the offset of the next page) starts."""
    if cursor is None:
        return 0
    if (isinstance(cursor, str) and cursor.isascii() and cursor.isdigit()  # (not "²")
            and len(cursor) < 9 and int(cursor) <= count):  # fmt: skip
        return int(cursor)
    raise MCPError(INVALID_PARAMS, "invalid cursor")


async def _ended(run: TaskRun) -> None:
    while run.status not in TERMINAL:
        await run.changed.wait()


def _can_elicit(session: ServerSession) -> bool:
    wanted = types.ClientCapabilities(elicitation=types.ElicitationCapability())
    try:
        return session.check_client_capability(wanted)
    except Exception:  # an SDK that moved: cannot ask
        return False
