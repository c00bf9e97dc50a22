"""The ``retinue`` command: ``run``, ``chat``, ``roles``, ``memory``, ``serve``, ``sessions``.

Heavy modules are imported inside the commands so that ``retinue --help`` stays fast.
Every expected failure is one line on stderr and a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from retinue.cli.doctor import doctor
from retinue.cli.mcp import mcp_app
from retinue.cli.memory import memory_app
from retinue.cli.remote import interrupt, serve, sessions

if TYPE_CHECKING:
    from retinue.engine.config import RunOutput
    from retinue.runtime import Runtime
    from retinue.subagents.roles import RoleProblem

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

ModelOpt = Annotated[
    str | None, typer.Option("--model", "-m", help="provider:model (default: RETINUE_MODEL)")
]
WorkspaceOpt = Annotated[
    Path | None, typer.Option("--workspace", "-w", help="workspace root (default: cwd)")
]
TenantOpt = Annotated[str | None, typer.Option("--tenant", help="whose memory to use")]

EXIT_FAILED, EXIT_INCOMPLETE, EXIT_INTERRUPTED = 1, 2, 130


def _err(message: str) -> None:
    from retinue.cli.term import console, escape

    console(stderr=True).print(f"[red]error:[/] {escape(message)}")


@contextmanager
def _one_line_errors() -> Iterator[None]:
    """Turn the errors a user can fix into one line on stderr and exit code 1."""
    from retinue.errors import RetinueError

    try:
        yield
    except RetinueError as exc:
        _err(str(exc))
        raise typer.Exit(EXIT_FAILED) from None
    except OSError as exc:
        _err(f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": "))
        raise typer.Exit(EXIT_FAILED) from None


def _runtime(
    model: str | None, workspace: Path | None, tenant: str | None, *, quiet: bool = False
) -> Runtime:
    from retinue.cli.render import EventPrinter
    from retinue.cli.term import console, escape, route_logs
    from retinue.config import Settings
    from retinue.runtime import Runtime

    settings = Settings.load(model=model, workspace=workspace, tenant=tenant)
    from retinue.llm.local import local_progress

    err = console(stderr=True)
    route_logs(err)
    printer = None if quiet else EventPrinter(err)
    if printer is not None:
        local_progress.set(printer.spinner.progress)
    runtime = Runtime.create(settings, events=printer)
    if runtime.notice:
        err.print(f"[dim]{escape(runtime.notice)}[/]")
    if problems := _worth_a_line(runtime):
        files, skipped = len({p.path for p in problems}), len(runtime.catalog.errors())
        err.print(f"[yellow]{files} role file(s) have problems ({skipped} not loaded): "
                  "see `retinue roles`[/]")  # fmt: skip
    return runtime


def _worth_a_line(runtime: Runtime) -> list[RoleProblem]:
    """The role problems to mention at start-up: not a packaged example role shadowed by
    the user's own role of that name (overriding an example is a choice, not a problem)."""
    from retinue.subagents.roles import PACKAGED_ROLES

    return [
        p
        for p in runtime.catalog.problems
        if not (p.path.is_relative_to(PACKAGED_ROLES) and "is shadowed by" in p.reason)
    ]


@app.command()
def run(
    task: Annotated[str, typer.Argument(help="what the agent should do")],
    model: ModelOpt = None,
    workspace: WorkspaceOpt = None,
    tenant: TenantOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress on stderr")] = False,
) -> None:
    """Run the main agent once on TASK; print only its final answer on stdout."""
    if not task.strip():
        _err('the task is empty: say what the agent should do, e.g. retinue run "list the TODOs"')
        raise typer.Exit(EXIT_FAILED)
    with _one_line_errors():
        runtime = _runtime(model, workspace, tenant, quiet=quiet)
        try:
            out = asyncio.run(_answering(runtime, task))
        except KeyboardInterrupt:
            _err("interrupted")
            raise typer.Exit(EXIT_INTERRUPTED) from None
    if out.stop_reason == "max_iterations":
        _err(out.content)
        raise typer.Exit(EXIT_INCOMPLETE)
    sys.stdout.write(out.content.rstrip("\n") + "\n")


async def _answering(runtime: Runtime, task: str) -> RunOutput:
    """One turn; each question the agent asks is answered from stdin (a line on a terminal;
    otherwise :data:`~retinue.subagents.tools.NO_ANSWER`) and the same turn goes on."""
    from retinue.subagents.tools import NO_ANSWER

    conversation = runtime.conversation()
    out = await conversation.send(task)
    while out.asking:
        sys.stderr.write(f"? {out.content}\n")
        line = await asyncio.to_thread(sys.stdin.readline) if sys.stdin.isatty() else ""
        out = await conversation.send(line.strip() or NO_ANSWER)
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
) -> None:
    """Chat with the main agent. /help lists the commands; Ctrl-C cancels a turn."""
    from retinue.cli.chat import ChatRepl

    with _one_line_errors():
        runtime = _runtime(model, workspace, tenant)
        ChatRepl(runtime, keep_sessions=keep_sessions).loop()


@app.command()
def roles(workspace: WorkspaceOpt = None) -> None:
    """List the roles sub-agents can take, where each comes from, and why files were skipped."""
    from retinue.cli.roles_view import print_catalog
    from retinue.cli.term import console
    from retinue.config import Settings
    from retinue.runtime import load_roles

    with _one_line_errors():
        catalog = load_roles(Settings.load(workspace=workspace))
    print_catalog(catalog, console(), console(stderr=True))


for _command in (serve, sessions, interrupt, doctor):
    app.command()(_command)


def main() -> None:
    app()
