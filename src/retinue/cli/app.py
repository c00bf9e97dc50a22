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

ModelOpt = Annotated[
    str | None, typer.Option("--model", "-m", help="provider:model (default: RETINUE_MODEL)")
]
WorkspaceOpt = Annotated[
    Path | None, typer.Option("--workspace", "-w", help="workspace root (default: cwd)")
]
TenantOpt = Annotated[str | None, typer.Option("--tenant", help="whose memory to use")]

EXIT_FAILED, EXIT_INCOMPLETE, EXIT_INTERRUPTED = 1, 2, 130


def _err(message: str) -> None:
    from rich.console import Console
    from rich.markup import escape

    Console(stderr=True, soft_wrap=True).print(f"[red]error:[/] {escape(message)}", highlight=False)


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
    from rich.console import Console

    from retinue.cli.render import EventPrinter
    from retinue.config import Settings
    from retinue.runtime import Runtime

    settings = Settings.load(model=model, workspace=workspace, tenant=tenant)
    from retinue.llm.local import local_progress

    console = Console(stderr=True, soft_wrap=True)
    printer = None if quiet else EventPrinter(console)
    if printer is not None:
        local_progress.set(printer.spinner.progress)
    runtime = Runtime.create(settings, events=printer)
    if runtime.notice:
        console.print(f"[dim]{runtime.notice}[/]", highlight=False)
    if problems := runtime.catalog.problems:
        files, skipped = len({p.path for p in problems}), len(runtime.catalog.errors())
        console.print(f"[yellow]{files} role file(s) have problems ({skipped} not loaded): "
                      "see `retinue roles`[/]", highlight=False)  # fmt: skip
    return runtime


@app.command()
def run(
    task: Annotated[str, typer.Argument(help="what the agent should do")],
    model: ModelOpt = None,
    workspace: WorkspaceOpt = None,
    tenant: TenantOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress on stderr")] = False,
) -> None:
    """Run the main agent once on TASK; print only its final answer on stdout."""
    with _one_line_errors():
        runtime = _runtime(model, workspace, tenant, quiet=quiet)
        try:
            out = asyncio.run(runtime.conversation().send(task))
        except KeyboardInterrupt:
            _err("interrupted")
            raise typer.Exit(EXIT_INTERRUPTED) from None
    if out.stop_reason == "max_iterations":
        _err(out.content)
        raise typer.Exit(EXIT_INCOMPLETE)
    sys.stdout.write(out.content.rstrip("\n") + "\n")


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
    from rich.console import Console

    from retinue.cli.roles_view import print_catalog
    from retinue.config import Settings
    from retinue.runtime import load_roles

    with _one_line_errors():
        catalog = load_roles(Settings.load(workspace=workspace))
    print_catalog(catalog, Console(soft_wrap=True), Console(stderr=True, soft_wrap=True))


for _command in (serve, sessions, interrupt, doctor):
    app.command()(_command)


def main() -> None:
    app()
