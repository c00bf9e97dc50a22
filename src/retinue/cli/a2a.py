"""``retinue a2a serve``: Retinue's roles served over A2A v1 (the ``a2a`` extra), on loopback
behind the service's bearer token or a named one (see :mod:`retinue.a2a`)."""

from __future__ import annotations

from typing import Annotated

import typer

from retinue.cli.common import ModelOpt, PermissionOpt, TenantOpt, WorkspaceOpt, one_line_errors
from retinue.cli.term import echo

a2a_app = typer.Typer(name="a2a", help="A2A (Agent2Agent): Retinue's roles served to other agents.",
                      no_args_is_help=True)  # fmt: skip


@a2a_app.command("serve")
def serve(
    model: ModelOpt = None,
    workspace: WorkspaceOpt = None,
    tenant: TenantOpt = None,
    port: Annotated[int, typer.Option(min=1, max=65535, help="the port on 127.0.0.1")] = 8767,
    permission_mode: PermissionOpt = None,
) -> None:
    """Serve the roles over A2A: the agent card (its skills are the roles) at
    /.well-known/agent-card.json and JSON-RPC at /. A message runs the role named in its
    metadata.role; its contextId is an interactive session (metadata.unload ends it,
    consolidating); a sub-agent's question is input-required; cancel interrupts. Each token
    is a parent of its own; the sessions still open are consolidated when the server stops."""
    try:
        from retinue.a2a.server import build_app
    except ImportError as exc:  # the a2a extra is not installed
        echo(f"A2A needs the a2a extra (pip install 'retinue[a2a]'): {exc}", err=True)
        raise typer.Exit(2) from None
    import uvicorn

    from retinue.config import Settings
    from retinue.runtime import Runtime
    from retinue.server.security import TOKEN_FILE, Guard, Security, ensure_token
    from retinue.server.tokens import TokenBook

    with one_line_errors():
        settings = Settings.load(model=model, workspace=workspace, tenant=tenant)
        runtime = Runtime.create(settings, permission_mode=permission_mode, default_mode="default")
        token, _ = ensure_token(settings.home)
    for problem in runtime.problems:
        echo(problem, err=True)
    url = f"http://127.0.0.1:{port}/"
    app, _executor = build_app(runtime, url)  # (its lifespan ends the sessions)
    guarded = Guard(app, Security.build(token, tokens=TokenBook(settings.home)))
    where = settings.home / TOKEN_FILE
    echo(f'retinue A2A on {url}; send "Authorization: Bearer $(cat {where})"', err=True)
    uvicorn.run(guarded, host="127.0.0.1", port=port, log_level="warning",
                timeout_graceful_shutdown=5)  # fmt: skip


@a2a_app.command("approve")
def approve(
    names: Annotated[list[str], typer.Argument(help="the roles whose remote agent to approve")],
    workspace: WorkspaceOpt = None,
) -> None:
    """Approve the remote A2A agent that a role file inside the workspace names (a2a: <url>),
    so its sessions may reach it; a changed URL or header variable needs approval again."""
    from retinue.config import Settings
    from retinue.llm.a2a import definition
    from retinue.policy.trust import TrustStore, printable
    from retinue.runtime import load_roles

    with one_line_errors():
        settings = Settings.load(workspace=workspace)
        roles = load_roles(settings).roles
        defs = []
        for name in names:
            role = roles.get(name)
            if role is None or role.a2a is None or role.source is None:
                echo(printable(f"no role {name!r} names a remote A2A agent"), err=True)
                raise typer.Exit(1)
            defs.append(definition(role.name, role.a2a, role.source))
        TrustStore(settings.home).approve(defs)
    for d in defs:
        echo(printable(f"approved: role {d.name!r} may reach {d.command} ({d.source})"))
