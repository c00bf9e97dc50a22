"""``retinue mcp list`` (the MCP servers agents use: state and tools) and ``retinue mcp
serve`` (Retinue's roles served to other agents over MCP, on stdio)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from retinue.mcp.client import McpHub

__all__ = ["mcp_app"]

mcp_app = typer.Typer(
    name="mcp",
    help="MCP both ways: the servers whose tools agents use, and Retinue served over MCP.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
WorkspaceOpt = Annotated[
    Path | None, typer.Option("--workspace", "-w", help="workspace root (default: cwd)")
]


@contextmanager
def _one_line_errors() -> Iterator[None]:
    from retinue.errors import RetinueError

    try:
        yield
    except (RetinueError, OSError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None


@mcp_app.command("list")
def list_servers(
    workspace: WorkspaceOpt = None,
    start: Annotated[
        bool, typer.Option("--start/--no-start", help="start each server to list its tools")
    ] = True,
) -> None:
    """The configured MCP servers (.mcp.json, config.toml, role files), their state and tools."""
    from retinue.config import Settings
    from retinue.mcp.config import attach_servers
    from retinue.runtime import load_roles
    from retinue.tools.base import ToolRegistry

    with _one_line_errors():
        settings = Settings.load(workspace=workspace)
        catalog = load_roles(settings)
        hub = attach_servers(ToolRegistry(), settings, catalog.roles.values())
    if hub is None:
        typer.echo("No MCP servers configured (.mcp.json, [mcp_servers] in config.toml, "
                   "or a role's mcpServers).")  # fmt: skip
        return
    for line in asyncio.run(_survey(hub, start=start)):
        typer.echo(line)


async def _survey(hub: McpHub, *, start: bool) -> list[str]:
    from retinue.mcp.client import McpError
    from retinue.mcp.tools import tool_name

    lines: list[str] = []
    try:
        for role, server in hub.all():
            owner = f" (role {role})" if role else ""
            tools = ""
            if start:
                try:
                    listed = await server.list_tools()
                    names = [tool_name(server.name, t.name) for t in listed]
                    tools = f"\n    {len(names)} tools: " + ", ".join(names)
                except McpError as exc:
                    tools = f"\n    {exc}"
            state = server.state if start else "not started"
            lines.append(f"{server.name}{owner}: {server.config.describe()} [{state}]{tools}")
    finally:
        await hub.close()
    return lines


@mcp_app.command("serve")
def serve(
    model: Annotated[
        str | None, typer.Option("--model", "-m", help="provider:model (default: RETINUE_MODEL)")
    ] = None,
    workspace: WorkspaceOpt = None,
    tenant: Annotated[str | None, typer.Option("--tenant", help="whose memory to use")] = None,
    http: Annotated[
        bool, typer.Option("--http", help="streamable HTTP on 127.0.0.1 instead of stdio")
    ] = False,
    port: Annotated[int, typer.Option(min=1, max=65535, help="the port for --http")] = 8766,
) -> None:
    """Serve the roles over MCP: SubAgent, UnloadSubAgent, SubAgentStatus.

    On stdio (default) the client's sessions end when it disconnects. With --http, on
    loopback behind the service's bearer token, all clients share one parent: sessions end
    when unloaded or when the server stops."""
    from retinue.config import Settings
    from retinue.runtime import Runtime
    from retinue.server.mcp_serve import build_server

    with _one_line_errors():
        settings = Settings.load(model=model, workspace=workspace, tenant=tenant)
        runtime = Runtime.create(settings)
        if runtime.notice:
            typer.echo(runtime.notice, err=True)
        server = build_server(runtime)
    if not http:
        asyncio.run(server.run_stdio_async())
        return
    _serve_http(server, runtime.settings.home, port)


def _serve_http(server: MCPServer[Any], home: Path, port: int) -> None:
    import uvicorn

    from retinue.server.security import TOKEN_FILE, Guard, Security, ensure_token

    with _one_line_errors():
        token, _ = ensure_token(home)
    app = Guard(server.streamable_http_app(host="127.0.0.1"), Security.build(token))
    typer.echo(f"retinue MCP on http://127.0.0.1:{port}/mcp; send "
               f'"Authorization: Bearer $(cat {home / TOKEN_FILE})"', err=True)  # fmt: skip
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", timeout_graceful_shutdown=5)
