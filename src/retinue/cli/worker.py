"""``retinue worker --temporal ADDRESS``: run conversations as Temporal workflows.

The worker runs on the runtime ``retinue run`` builds from the settings (model, tools,
roles, memory, policy); any number of them, on any machines, serve one task queue
(:mod:`retinue.temporal`). Needs the ``temporal`` extra.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import sys
from dataclasses import dataclass
from typing import Annotated, Any, NoReturn

import typer

from retinue.cli.common import (
    EXIT_INTERRUPTED,
    ModelOpt,
    PermissionOpt,
    TenantOpt,
    WorkspaceOpt,
    make_runtime,
    one_line_errors,
)
from retinue.cli.term import echo
from retinue.errors import ConfigError

__all__ = ["TemporalTarget", "resolve", "worker"]


@dataclass(slots=True)
class TemporalTarget:
    """The Temporal server, namespace and task queue of ``retinue serve`` and ``worker``."""

    address: str
    namespace: str = "default"
    task_queue: str = "retinue"


def resolve(
    address: str | None,
    namespace: str | None,
    task_queue: str | None,
    configured: dict[str, Any],
) -> TemporalTarget | None:
    """The flags over ``configured`` (config.toml's ``[temporal]`` table); None without an
    address in either."""
    found = address or configured.get("address")
    if not found:
        return None
    return TemporalTarget(
        found,
        namespace or configured.get("namespace") or "default",
        task_queue or configured.get("task_queue") or "retinue",
    )


def worker(
    temporal: Annotated[
        str | None,
        typer.Option(
            "--temporal",
            metavar="ADDRESS",
            help="the Temporal server, host:port [default: [temporal] address in config.toml]",
        ),
    ] = None,
    namespace: Annotated[
        str | None, typer.Option(help="the Temporal namespace [default: default]")
    ] = None,
    task_queue: Annotated[
        str | None, typer.Option(help="the task queue to serve [default: retinue]")
    ] = None,
    model: ModelOpt = None,
    workspace: WorkspaceOpt = None,
    tenant: TenantOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no event log on stderr")] = False,
    permission_mode: PermissionOpt = None,
) -> None:
    """Run conversations as durable Temporal workflows: each model and tool call is an
    activity this worker (or any other on the task queue) runs. A call that needs approval
    is refused unless --permission-mode or a rule allows it (nobody to ask yet)."""
    try:
        from retinue.temporal.worker import run_worker
    except ImportError as exc:  # the temporal extra is not installed
        echo(f"the worker needs the temporal extra (pip install 'retinue[temporal]'): {exc}",
             err=True)  # fmt: skip
        raise typer.Exit(2) from None
    try:
        with one_line_errors():
            runtime = make_runtime(
                model, workspace, tenant, quiet=quiet, permission_mode=permission_mode
            )
            at = resolve(temporal, namespace, task_queue, runtime.settings.temporal)
            if at is None:
                raise ConfigError("give --temporal ADDRESS, or [temporal] address in config.toml")
            echo(f"retinue worker on {at.address} ({at.namespace}/{at.task_queue}), tenant "
                 f"{runtime.settings.tenant!r}, model {runtime.model.name}", err=True)  # fmt: skip
            try:
                asyncio.run(run_worker(at.address, runtime, namespace=at.namespace,
                                       task_queue=at.task_queue))  # fmt: skip
            except KeyboardInterrupt:
                echo("stopped", err=True)
                raise typer.Exit(EXIT_INTERRUPTED) from None
    except typer.Exit as exc:
        _leave(exc.exit_code)
    _leave(0)


def _leave(code: int) -> NoReturn:
    """Exit without the interpreter's teardown: the Temporal SDK's Rust threads outlive the
    event loop, and finalizing under them may abort the process (temporalio/sdk-python#300,
    seen here as exit code 134 after a failed connect). The exit handlers still run first:
    they end the shell commands still running (each in a session of its own) and the
    embedded model's worker, which ``os._exit`` alone would leave behind."""
    try:
        atexit._run_exitfuncs()  # (the registered cleanups, before the teardown is skipped)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
