"""What the command modules share: their options, one-line errors and exit codes, the
runtime a command builds, and the usage line's style. It sits below every command module
(``app``, ``remote``, ``mcp``…) and imports none of them.

Heavy modules are imported inside the functions so that ``retinue --help`` stays fast.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from typer.core import TyperCommand

if TYPE_CHECKING:
    from retinue.runtime import Runtime
    from retinue.subagents.roles import RoleProblem

__all__ = [
    "EXIT_FAILED",
    "EXIT_INCOMPLETE",
    "EXIT_INTERRUPTED",
    "BudgetOpt",
    "ModelOpt",
    "PermissionOpt",
    "PlainUsage",
    "TenantOpt",
    "WorkspaceOpt",
    "err",
    "fail",
    "make_runtime",
    "one_line_errors",
    "port_option",
]

EXIT_FAILED, EXIT_INCOMPLETE, EXIT_INTERRUPTED = 1, 2, 130

BudgetOpt = Annotated[
    float | None,
    typer.Option(
        "--max-budget-usd",
        min=0.0,
        help="US dollars the main agent's session may spend (checked before each turn)",
    ),
]
ModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model", "-m", help="provider:model, a model id or an alias (default: RETINUE_MODEL)"
    ),
]
WorkspaceOpt = Annotated[
    Path | None, typer.Option("--workspace", "-w", help="workspace root (default: cwd)")
]
TenantOpt = Annotated[str | None, typer.Option("--tenant", help="whose memory to use")]
PermissionOpt = Annotated[
    str | None,
    typer.Option(
        "--permission-mode",
        help="default, acceptEdits, plan, dontAsk or bypassPermissions "
        "(default: the settings' mode, else default)",
    ),
]


def port_option(help: str) -> Any:
    """A TCP port option: 0-65535, anything else is a one-line usage error."""
    return typer.Option(min=0, max=65535, help=help)


def err(message: str) -> None:
    """``error: message`` on stderr, the message escaped (it may quote anything)."""
    from retinue.cli.term import console, escape

    console(stderr=True).print(f"[red]error:[/] {escape(message)}")


def fail(message: str) -> NoReturn:
    """One line on stderr and exit code 1."""
    err(message)
    raise typer.Exit(EXIT_FAILED)


@contextmanager
def one_line_errors() -> Iterator[None]:
    """Turn the errors a user can fix into one line on stderr and exit code 1."""
    from retinue.errors import RetinueError

    try:
        yield
    except RetinueError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": "))


def make_runtime(
    model: str | None,
    workspace: Path | None,
    tenant: str | None,
    *,
    quiet: bool = False,
    permission_mode: str | None = None,
    ask: bool = False,
    max_budget_usd: float | None = None,
) -> Runtime:
    """The runtime a command runs on, progress printed on stderr unless ``quiet``. Calls
    that need approval are asked on the terminal with ``ask``, else refused (nobody to ask);
    ``permission_mode`` is the ``--permission-mode`` flag's."""
    from retinue.cli.render import EventPrinter
    from retinue.cli.term import console, escape, route_logs
    from retinue.config import Settings
    from retinue.llm.local import local_progress
    from retinue.runtime import Runtime

    settings = Settings.load(model=model, workspace=workspace, tenant=tenant)
    if max_budget_usd is not None:  # --max-budget-usd wins over config.toml's
        settings.max_budget_usd = max_budget_usd
    stderr = console(stderr=True)
    route_logs(stderr)
    printer = None if quiet else EventPrinter(stderr)
    if printer is not None:
        local_progress.set(printer.spinner.progress)
    approver = None
    if ask:
        from retinue.cli.approve import TerminalApprover

        approver = TerminalApprover(stderr, before=printer.pause if printer else None)
    runtime = Runtime.create(
        settings,
        events=printer,
        permission_mode=permission_mode,
        default_mode="default",
        approver=approver,
    )
    if runtime.notice:
        stderr.print(f"[dim]{escape(runtime.notice)}[/]")
    for problem in runtime.problems:
        stderr.print(f"[yellow]{escape(problem)}[/]")
    if problems := _worth_a_line(runtime):
        files, skipped = len({p.path for p in problems}), len(runtime.catalog.errors())
        stderr.print(f"[yellow]{files} role file(s) have problems ({skipped} not loaded): "
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


class PlainUsage(TyperCommand):
    """A command whose usage line names a required argument ``TASK``, as Unix usage lines do
    (Typer writes ``{task}``)."""

    def collect_usage_pieces(self, ctx: typer.Context) -> list[str]:  # type: ignore[override]
        pieces = super().collect_usage_pieces(ctx)
        return [_REQUIRED.sub(lambda m: m[1].upper(), piece) for piece in pieces]


_REQUIRED = re.compile(r"^\{(\w+)\}")
