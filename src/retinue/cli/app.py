"""The ``retinue`` command: ``run``, ``chat``, ``roles``, ``memory``, ``serve``, ``sessions``.

Heavy modules are imported inside the commands so that ``retinue --help`` stays fast.
Every expected failure is one line on stderr and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from typer.core import TyperCommand

from retinue.cli.a2a import a2a_app
from retinue.cli.common import (
    EXIT_FAILED,
    EXIT_INCOMPLETE,
    EXIT_INTERRUPTED,
    BudgetOpt,
    ModelOpt,
    PermissionOpt,
    PlainUsage,
    TenantOpt,
    WorkspaceOpt,
    err,
    make_runtime,
    one_line_errors,
)
from retinue.cli.doctor import doctor
from retinue.cli.hooks import hooks_app
from retinue.cli.mcp import mcp_app
from retinue.cli.memory import memory_app
from retinue.cli.remote import interrupt, serve, sessions
from retinue.cli.skills import skills
from retinue.cli.tokens import token_app
from retinue.cli.worker import worker

if TYPE_CHECKING:
    from retinue.engine.config import RunOutput
    from retinue.messages import Content
    from retinue.runtime import Runtime

__all__ = ["app", "main"]

app = typer.Typer(
    name="retinue",
    help="Agents that delegate to role-defined sub-agents, with a memory of their own.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain help: the Markdown renderer costs ~0.1 s of start-up
)
app.add_typer(memory_app)
app.add_typer(mcp_app)
app.add_typer(token_app)
app.add_typer(hooks_app)
app.add_typer(a2a_app)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        from retinue.cli.term import echo

        echo(f"retinue {version('retinue')}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="print the version and exit"
        ),
    ] = False,
) -> None:
    """Agents that delegate to role-defined sub-agents, with a memory of their own."""


@app.command()
def run(
    task: Annotated[str, typer.Argument(metavar="TASK", help="what the agent should do")],
    model: ModelOpt = None,
    workspace: WorkspaceOpt = None,
    tenant: TenantOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress on stderr")] = False,
    permission_mode: PermissionOpt = None,
    max_budget_usd: BudgetOpt = None,
    attach: Annotated[
        list[Path] | None,
        typer.Option(
            "--attach", metavar="FILE", help="an image or PDF sent with TASK (repeatable)"
        ),
    ] = None,
) -> None:
    """Run the main agent once on TASK; print only its final answer on stdout.

    A call that needs approval is asked on the terminal; without one (a pipe, CI) it is
    refused unless --permission-mode or a rule allows it."""
    if not task.strip():
        err('the task is empty: say what the agent should do, e.g. retinue run "list the TODOs"')
        raise typer.Exit(EXIT_FAILED)
    with one_line_errors():
        from retinue.messages import user_content

        _, files = user_content(list(attach or ()))  # read and checked before anything runs
        runtime = make_runtime(
            model, workspace, tenant, quiet=quiet, permission_mode=permission_mode,
            ask=sys.stdin.isatty() and sys.stderr.isatty(), max_budget_usd=max_budget_usd,
        )  # fmt: skip
        from retinue.cli.render import prepare_model

        prepare_model(runtime.model)  # (its progress bar before any spinner)
        try:
            out = asyncio.run(_answering(runtime, [task, *files] if files else task))
        except KeyboardInterrupt:
            err("interrupted")
            raise typer.Exit(EXIT_INTERRUPTED) from None
    if out.stopped:  # max_iterations, or a call repeated after a warning
        err(out.content)
        raise typer.Exit(EXIT_INCOMPLETE)
    from retinue.cli.term import echo

    echo(out.content.rstrip("\n"))  # (the model's text: nothing in it a terminal acts on)


async def _answering(runtime: Runtime, task: Content) -> RunOutput:
    """One turn; each question the agent asks is answered from stdin (a line on a terminal;
    otherwise :data:`~retinue.subagents.tools.NO_ANSWER`) and the same turn goes on."""
    from retinue.cli.term import echo
    from retinue.subagents.tools import NO_ANSWER

    conversation = runtime.conversation()
    out = await conversation.send(task)
    while out.asking:
        echo(f"? {out.content}", err=True)
        line = await asyncio.to_thread(sys.stdin.readline) if sys.stdin.isatty() else ""
        out = await conversation.send(line.strip() or NO_ANSWER)
    await conversation.close()  # the conversation ends here (its SessionEnd hooks run)
    return out


@app.command()
def chat(
    model: ModelOpt = None,
    workspace: WorkspaceOpt = None,
    tenant: TenantOpt = None,
    keep_sessions: Annotated[
        bool,
        typer.Option(
            "--keep-sessions",
            help="keep interactive sub-agent sessions across messages (until /new or exit)",
        ),
    ] = False,
    permission_mode: PermissionOpt = None,
    max_budget_usd: BudgetOpt = None,
) -> None:
    """Chat with the main agent. /help lists the commands; Ctrl-C cancels a turn."""
    from retinue.cli.chat import ChatRepl
    from retinue.cli.trust_prompt import ask_workspace_trust

    with one_line_errors():
        ask_workspace_trust(workspace)  # the workspace's own MCP servers: y/n on first use
        runtime = make_runtime(
            model,
            workspace,
            tenant,
            permission_mode=permission_mode,
            ask=sys.stdin.isatty(),
            max_budget_usd=max_budget_usd,
        )
        ChatRepl(runtime, keep_sessions=keep_sessions).loop()


@app.command()
def roles(
    workspace: WorkspaceOpt = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="list Markdown files that are not agents too")
    ] = False,
) -> None:
    """List the roles sub-agents can take, where each comes from, and why files were skipped."""
    from retinue.cli.roles_view import print_catalog
    from retinue.cli.term import console
    from retinue.config import Settings
    from retinue.runtime import load_roles

    with one_line_errors():
        catalog = load_roles(Settings.load(workspace=workspace))
    print_catalog(catalog, console(), console(stderr=True), verbose=verbose)


for _command in (serve, sessions, interrupt, doctor, skills, worker):
    app.command()(_command)


def _plain_usage(typer_app: typer.Typer) -> None:
    """Every command's usage line says ``TASK``, not ``{task}`` (see :class:`PlainUsage`)."""
    for info in typer_app.registered_commands:
        if info.cls in (None, TyperCommand):
            info.cls = PlainUsage
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            _plain_usage(group.typer_instance)


_plain_usage(app)


def main() -> None:
    from retinue.cli.term import safe_tracebacks

    safe_tracebacks()
    app()
