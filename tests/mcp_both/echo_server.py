"""A tiny MCP server for the tests, written with the SDK (run: python echo_server.py)."""

from __future__ import annotations

import asyncio
import fcntl
import os
import sys
import uuid
from pathlib import Path

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image

server = MCPServer("echo")
MARKS = Path(os.environ.get("ECHO_MARKS", "."))
INSTANCE = uuid.uuid4().hex[:12]  # which start of the server this is (PIDs repeat in sandboxes)


@server.tool()
def echo(text: str) -> str:
    """Say the text back."""
    return f"echo: {text}"


@server.tool()
def add(a: int, b: int) -> dict[str, int]:
    """Add two numbers (structured result)."""
    return {"sum": a + b}


@server.tool()
def fail(reason: str) -> str:
    """Always fails."""
    raise ToolError(reason)


@server.tool()
def crash() -> str:
    """Kills the server process."""
    os._exit(3)


@server.tool()
def picture() -> Image:
    """A tiny image."""
    return Image(data=b"\x89PNG fake", format="png")


@server.tool()
async def grow(ctx: Context) -> str:
    """Adds the tool 'extra' and says the tool list changed."""
    server.add_tool(extra)
    await ctx.notify_tools_changed()  # 2026 connections: to subscriptions/listen streams
    await ctx.session.send_tool_list_changed()  # older ones: a notification
    return "grown"


def extra() -> str:
    """A tool that appears later."""
    return "extra here"


@server.tool()
def pid() -> str:
    """The server's process id."""
    return str(os.getpid())


@server.tool()
def instance() -> str:
    """Which start of the server this is (``mcp_kit.running`` says whether it still runs)."""
    return INSTANCE


@server.tool()
def client(ctx: Context) -> str:
    """How the calling client names itself (its clientInfo)."""
    params = ctx.session.client_params
    info = params.client_info if params is not None else None
    return f"{info.name} {info.version}" if info is not None else "unnamed"


@server.tool()
async def sleep(seconds: float) -> str:
    """Sleeps; leaves a mark when it starts and when it is cancelled."""
    (MARKS / "sleep-started").write_text("1")
    try:
        await asyncio.sleep(seconds)
    except BaseException:
        (MARKS / "sleep-cancelled").write_text("1")
        raise
    return "slept"


if __name__ == "__main__":
    (MARKS / f"pid-{os.getpid()}").write_text("1")
    held = open(MARKS / f"run-{INSTANCE}", "w")  # noqa: SIM115 (locked while it lives)
    fcntl.flock(held, fcntl.LOCK_EX)
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    elif len(sys.argv) > 2 and sys.argv[1] == "sse":
        server.run("sse", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
