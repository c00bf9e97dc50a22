"""Retinue's MCP client and MCP Tasks (2026-07-28): a tool that requires task-augmented
execution is called as a task at 2026-07-28, where Retinue declares the Tasks extension
(polled to its end; a question it asks is declined, nobody being there to answer), and
still left out with a notice at 2025-11-25, whose earlier tasks Retinue does not call. The
server is a real SDK server in process, serving Tasks with Retinue's own extension."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer

from retinue.events import NOTICE, Event
from retinue.mcp.client import McpError, McpServer
from retinue.mcp.server.tasks import Asker, TaskBook, TasksExtension
from retinue.mcp.servers import StdioServer
from retinue.mcp.tools import McpSource
from retinue.tools.base import ToolContext


class TaskServer(MCPServer[Any]):
    """``long_job`` requires tasks (its listing says so); ``quick`` is an ordinary tool."""

    async def list_tools(self) -> list[types.Tool]:
        required = types.ToolExecution(task_support="required")
        return [t.model_copy(update={"execution": required}) if t.name == "long_job" else t
                for t in await super().list_tools()]  # fmt: skip


def task_server(seen: list[dict[str, Any]], book: list[TaskBook] | None = None
                ) -> MCPServer[Any]:  # fmt: skip
    async def work(_who: Any, arguments: dict[str, Any], ask: Asker, *_: Any
                   ) -> types.CallToolResult:  # fmt: skip
        seen.append(arguments)
        if arguments.get("size") == 0:
            await asyncio.Event().wait()  # never ends
        form = {"mode": "form", "message": "Sure?", "requestedSchema": {"type": "object"}}
        answers = await ask({"ok": {"method": "elicitation/create", "params": form}})
        await asyncio.sleep(0.2)  # long enough to be polled at least once
        said = answers["ok"].get("action")
        return types.CallToolResult(content=[types.TextContent(text=f"job done ({said})")])

    tasks = TaskBook(work)
    if book is not None:
        book.append(tasks)
    server = TaskServer("jobs", extensions=[TasksExtension(tasks, {"long_job"},
                                                           lambda _ctx: None)])  # fmt: skip

    @server.tool(structured_output=False)
    def long_job(size: int) -> str:
        raise AssertionError("a task-only tool is never called directly")

    @server.tool(structured_output=False)
    def quick() -> str:
        return "quick"

    del long_job, quick
    return server


class InProcess(McpServer):
    """An McpServer whose connection is the in-process server, with Retinue's options."""

    def __init__(self, server: MCPServer[Any], cwd: Path, timeout: float = 120, **mode: Any
                 ) -> None:  # fmt: skip
        config = StdioServer(command="unused", timeout=timeout)
        super().__init__("jobs", config, cwd=cwd, log_dir=None)
        self.inner, self.mode = server, mode

    def _connect(self, errlog: Any) -> Client:
        return Client(self.inner, **self._options(), **self.mode)


@dataclass
class Hub:
    server: McpServer

    def visible(self, role: str) -> dict[str, McpServer]:
        return {self.server.name: self.server}


async def test_a_tool_that_requires_tasks_is_called_as_a_task(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []
    server = InProcess(task_server(seen), tmp_path)
    events: list[Event] = []
    ctx = ToolContext("main", tmp_path, tmp_path, events=events.append)
    try:
        tools = {t.name: t for t in await McpSource(Hub(server)).tools(ctx, [], frozenset())}  # type: ignore[arg-type]
        assert server.tasks
        assert set(tools) == {"mcp__jobs__long_job", "mcp__jobs__quick"}
        out = await tools["mcp__jobs__long_job"].invoke(ctx, '{"size": 3}')
        assert await tools["mcp__jobs__quick"].invoke(ctx, "{}") == "quick"
    finally:
        await server.close()
    assert out == "job done (decline)"  # the task's question was declined, then it ended
    assert seen == [{"size": 3}]
    assert not [e for e in events if e.kind == NOTICE]


async def test_at_2025_11_25_the_tool_is_left_out_with_a_notice(tmp_path: Path) -> None:
    """(2025-11-25's tasks are the earlier, task-augmented requests; the listing says which
    tools require them. At 2026-07-28 the listing no longer does: the server decides.)"""
    server = InProcess(task_server([]), tmp_path, mode="legacy")
    events: list[Event] = []
    ctx = ToolContext("main", tmp_path, tmp_path, events=events.append)
    try:
        tools = await McpSource(Hub(server)).tools(ctx, [], frozenset())  # type: ignore[arg-type]
        assert not server.tasks
    finally:
        await server.close()
    assert [t.name for t in tools] == ["mcp__jobs__quick"]
    [notice] = [e.data["text"] for e in events if e.kind == NOTICE]
    assert "long_job" in notice and "Tasks" in notice


async def test_a_task_past_the_servers_timeout_is_cancelled_on_the_server(tmp_path: Path) -> None:
    books: list[TaskBook] = []
    server = InProcess(task_server([], books), tmp_path, timeout=1.0)
    ctx = ToolContext("main", tmp_path, tmp_path)
    try:
        tools = {t.name: t for t in await McpSource(Hub(server)).tools(ctx, [], frozenset())}  # type: ignore[arg-type]
        with pytest.raises(McpError, match="timed out"):
            await tools["mcp__jobs__long_job"].invoke(ctx, '{"size": 0}')
        [book] = books
        [run] = book._tasks.values()  # (the server's own record of the task)
        for _ in range(1000):
            if run.status == "cancelled":
                break
            await asyncio.sleep(0.02)
        assert run.status == "cancelled"  # tasks/cancel reached it; its job was stopped
        assert run.job is not None and run.job.cancelled()
    finally:
        await server.close()
