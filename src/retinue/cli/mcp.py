"""``retinue mcp list`` (the MCP servers agents use: trust, state and tools), ``retinue mcp
approve`` / ``revoke`` (trust for the servers workspace files define) and ``retinue mcp
serve`` (Retinue's roles served to other agents over MCP, on stdio)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from retinue.cli.common import PermissionOpt, WorkspaceOpt
from retinue.cli.common import one_line_errors as _one_line_errors
from retinue.cli.term import echo

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from retinue.cli.approving import Candidate
    from retinue.config import Settings
    from retinue.mcp.client import McpHub
    from retinue.mcp.config import Configured
    from retinue.policy.trust import TrustStore

__all__ = ["mcp_app"]

mcp_app = typer.Typer(
    name="mcp",
    help="MCP both ways: the servers whose tools agents use, and Retinue served over MCP.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


def _load(workspace: Path | None) -> tuple[Settings, list[Configured]]:
    """The settings and every configured server (shared ones, then roles' inline ones)."""
    from retinue.config import Settings
    from retinue.mcp.config import configured_servers
    from retinue.runtime import load_roles

    settings = Settings.load(workspace=workspace)
    catalog = load_roles(settings)
    return settings, configured_servers(settings, catalog.roles.values())


def _where(c: Configured) -> str:
    from retinue.policy.trust import printable

    return printable(f"{c.source or 'code'}" + (f", role {c.role}" if c.role else ""))


def _what(c: Configured) -> str:
    """The server's command or URL as written, escaped for a terminal."""
    from retinue.policy.trust import printable

    return printable(c.config.describe())


@mcp_app.command("list")
def list_servers(
    workspace: WorkspaceOpt = None,
    start: Annotated[
        bool, typer.Option("--start/--no-start", help="start each server to list its tools")
    ] = True,
) -> None:
    """The configured MCP servers (.mcp.json, config.toml, role files), whether each is
    approved, their state and tools. A server a workspace file defines starts only once
    approved (`retinue mcp approve`); this command never starts one that is not."""
    from retinue.mcp.config import build_hub, trust_state
    from retinue.policy.trust import TrustStore, untrusted_line

    with _one_line_errors():
        settings, found = _load(workspace)
        store = TrustStore(settings.home)
        states = [(c, trust_state(c, settings, store)) for c in found]
        hub = build_hub(settings, [c for c, state in states if state != "untrusted"])
    if not found:
        echo("No MCP servers configured (.mcp.json, [mcp_servers] in config.toml, "
                   "or a role's mcpServers).")  # fmt: skip
        return
    started = asyncio.run(_survey(hub, start=start)) if hub is not None else {}
    for c, state in states:
        owner = f" (role {c.role})" if c.role else ""
        if state == "untrusted":
            d = c.definition()
            assert d is not None
            echo(f"{c.name}{owner}: {_what(c)} [not approved]\n"
                       f"    {untrusted_line(d)}")  # fmt: skip
            continue
        trust = " approved" if state == "approved" else ""
        echo(f"{c.name}{owner}: {_what(c)}{trust} "
                   f"{started.get((c.role, c.name), '[not started]')}")  # fmt: skip


async def _survey(hub: McpHub, *, start: bool) -> dict[tuple[str | None, str], str]:
    """``(role, name) -> "[state]" and its tools`` for every server of ``hub``."""
    from retinue.mcp.client import McpError
    from retinue.mcp.tools import tool_name
    from retinue.policy.trust import printable

    out: dict[tuple[str | None, str], str] = {}
    try:
        for role, server in hub.all():
            tools = ""
            if start:
                try:
                    listed = await server.list_tools()
                    names = [tool_name(server.name, t.name) for t in listed]
                    tools = f"\n    {len(names)} tools: " + ", ".join(names)
                except McpError as exc:
                    tools = f"\n    {printable(str(exc))}"  # a server's own words
            state = server.state if start else "not started"
            out[(role, server.name)] = f"[{state}]{tools}"
    finally:
        await hub.close()
    return out


@mcp_app.command("approve")
def approve(
    names: Annotated[
        list[str] | None, typer.Argument(help="the servers to approve (default: every one)")
    ] = None,
    workspace: WorkspaceOpt = None,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="approve without asking (needed off a terminal)")
    ] = False,
) -> None:
    """Approve MCP servers that workspace files define (.mcp.json, a role's mcpServers), so
    that they may start. The approval is of that exact definition (command, arguments,
    environment names and values as written) in that file: a changed one needs approval
    again. A project's .claude/settings.json (or settings.local.json) whose allow rules or
    defaultMode wait for approval is approved by its file name. Without NAMES: every one not
    approved yet, after showing them."""
    from retinue.cli.approving import Candidate, approve_candidates
    from retinue.mcp.config import trust_state
    from retinue.policy.trust import TrustStore

    with _one_line_errors():
        settings, found = _load(workspace)
        store = TrustStore(settings.home)
        shown = [Candidate(c.name, _where(c), _what(c), trust_state(c, settings, store),
                           c.definition()) for c in found]  # fmt: skip
        shown += _settings_candidates(settings, store)
        approve_candidates(shown, names, yes=yes, store=store, noun="MCP server",
                           plural="servers")  # fmt: skip


def _settings_candidates(settings: Settings, store: TrustStore) -> list[Candidate]:
    """The project settings files (``.claude/settings*.json``) whose allow rules or
    ``defaultMode`` wait for approval, or have it."""
    from retinue.cli.approving import Candidate
    from retinue.policy.settings import load_permissions, read_settings
    from retinue.policy.trust import printable, settings_definition

    out: list[Candidate] = []
    for path in load_permissions(settings.workspace).untrusted:  # those that loosen anything
        data, _, _ = read_settings(path)
        section = (data or {}).get("permissions")
        if isinstance(section, dict):
            d = settings_definition(path, section)
            state = "approved" if store.is_trusted(d) else "untrusted"
            out.append(Candidate(d.name, printable(str(path)), d.describe(), state, d))
    return out


@mcp_app.command("revoke")
def revoke(
    names: Annotated[list[str], typer.Argument(help="the servers whose approval to forget")],
    workspace: WorkspaceOpt = None,
) -> None:
    """Forget the approval of workspace-defined MCP servers: they will not start again
    until approved."""
    from retinue.policy.trust import TrustStore

    with _one_line_errors():
        settings, found = _load(workspace)
        store = TrustStore(settings.home)
        defs = [d for c in found if c.name in names and (d := c.definition()) is not None]
        defs += [c.definition for c in _settings_candidates(settings, store)
                 if c.name in names and c.definition is not None]  # fmt: skip
        gone = store.revoke(defs)
    echo(f"Revoked {gone} approval(s).")


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
    permission_mode: PermissionOpt = None,
) -> None:
    """Serve the roles over MCP: SubAgent, UnloadSubAgent, SubAgentStatus.

    On stdio (default) the client's sessions end when it disconnects. With --http, on
    loopback behind the service's bearer token or a named one (`retinue token issue`), each
    token is a parent of its own in its tenant: sessions end when unloaded or when the
    server stops. A sub-agent's call that needs approval is asked of the client by
    elicitation where it declares it, and refused (saying how to allow it) where not."""
    from retinue.config import Settings
    from retinue.mcp.server.serve import build_server
    from retinue.runtime import Runtime

    with _one_line_errors():
        settings = Settings.load(model=model, workspace=workspace, tenant=tenant)
        runtime = Runtime.create(settings, permission_mode=permission_mode, default_mode="default")
        if runtime.notice:
            echo(runtime.notice, err=True)
        for problem in runtime.problems:
            echo(problem, err=True)
        server = build_server(runtime)
    if not http:
        asyncio.run(server.run_stdio_async())
        return
    _serve_http(server, runtime.settings.home, port)


def _serve_http(server: MCPServer[Any], home: Path, port: int) -> None:
    import uvicorn

    from retinue.mcp.server.http import SessionOwners
    from retinue.server.security import TOKEN_FILE, Guard, Security, ensure_token
    from retinue.server.tokens import TokenBook

    with _one_line_errors():
        token, _ = ensure_token(home)
    security = Security.build(token, tokens=TokenBook(home))  # `retinue token issue`
    app = Guard(SessionOwners(server.streamable_http_app(host="127.0.0.1")), security)
    echo(f"retinue MCP on http://127.0.0.1:{port}/mcp; send "
               f'"Authorization: Bearer $(cat {home / TOKEN_FILE})"', err=True)  # fmt: skip
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", timeout_graceful_shutdown=5)
