"""``retinue memory``: look at and edit what roles remember, and retry kept consolidations.

``show ROLE``, ``search ROLE QUERY``, ``edit ROLE BLOCK`` and ``retry``, each with
``--tenant``; the data directory comes from :class:`~retinue.config.Settings`
(``RETINUE_HOME``). Errors are one line on stderr and exit code 1.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import click
import typer
from rich.markup import escape
from rich.panel import Panel

from retinue.cli.term import console
from retinue.config import Settings
from retinue.errors import ConfigError, RetinueError

if TYPE_CHECKING:  # the store and the providers load only when a command runs
    from retinue.llm.base import Model
    from retinue.memory import SQLiteMemory

__all__ = ["memory_app"]

memory_app = typer.Typer(
    name="memory", help="Inspect and edit the long-term memory of roles.", no_args_is_help=True
)

_out = console()
_err = console(stderr=True)
T = TypeVar("T")

Tenant = Annotated[str, typer.Option("--tenant", help="whose memory (tenant name)")]


def _fail(message: str) -> typer.Exit:
    _err.print(f"[red]error:[/red] {escape(message)}")
    return typer.Exit(1)


@contextmanager
def _memory() -> Iterator[SQLiteMemory]:
    from retinue.memory import open_memory

    try:
        store = open_memory(Settings.load().home)
    except RetinueError as exc:
        raise _fail(str(exc)) from None
    try:
        yield store
    except RetinueError as exc:
        raise _fail(str(exc)) from None
    finally:
        store.close()


def _run(factory: Callable[[], Coroutine[Any, Any, T]]) -> T:
    return asyncio.run(factory())


@memory_app.command("show")
def show(role: str, tenant: Tenant = "default") -> None:
    """Show a role's core blocks and how many archival passages it has."""
    with _memory() as store:
        blocks = _run(lambda: store.blocks(tenant, role))
        count = _run(lambda: store.passage_count(tenant, role))
    if not count and not any(b.value for b in blocks):
        _nothing_stored(role, tenant)
        return
    for b in blocks:
        title = f"{b.name} [dim]({len(b.value)}/{b.limit} chars)[/dim]"
        _out.print(Panel(escape(b.value) or "[dim](empty)[/dim]", title=title, title_align="left"))
    _out.print(f"archival passages: [bold]{count}[/bold]  (tenant {escape(tenant)!r})")


def _nothing_stored(role: str, tenant: str) -> None:
    """Say that ``role`` has no memory; an error when no role of that name exists here."""
    from retinue.runtime import load_roles

    try:
        known = ["main", *load_roles(Settings.load()).roles]
    except RetinueError:
        known = ["main"]
    if role not in known:
        names = ", ".join(sorted(known)[:20]) or "none"
        raise _fail(f"no role named {role!r} has memory (tenant {tenant!r}); roles here: {names}")
    _out.print(f"{escape(role)} has no memory yet (tenant {escape(tenant)!r})")


@memory_app.command("search")
def search(
    role: str,
    query: str,
    tenant: Tenant = "default",
    limit: Annotated[int, typer.Option(min=1, max=100, help="most passages to show")] = 10,
) -> None:
    """Search a role's archival memory."""
    with _memory() as store:
        hits = _run(lambda: store.search(tenant, role, query, limit))
    if not hits:
        _out.print(f"no passages match {escape(query)!r}")
        return
    for p in hits:
        _out.print(f"[bold]#{p.id}[/bold] [dim]{escape(p.source)}[/dim]\n  {escape(p.content)}")


@memory_app.command("edit")
def edit(
    role: str,
    block: str,
    tenant: Tenant = "default",
    value: Annotated[
        str | None, typer.Option("--value", help="new text; without it, $EDITOR opens")
    ] = None,
) -> None:
    """Replace a core block's text (from --value, or in $EDITOR)."""
    with _memory() as store:
        if value is None:
            current = {b.name: b.value for b in _run(lambda: store.blocks(tenant, role))}
            if block not in current:
                raise _fail(f"unknown block {block!r}; blocks are: {', '.join(current)}")
            edited = click.edit(current[block], extension=".md")
            if edited is None:
                _out.print("unchanged")
                return
            value = edited.rstrip("\n")
        text: str = value
        b = _run(lambda: store.set_block(tenant, role, block, text))
    _out.print(f"saved {b.name!r} ({len(b.value)}/{b.limit} chars)")


@memory_app.command("retry")
def retry(
    model: Annotated[
        str | None, typer.Option("--model", help="provider:model (default: RETINUE_MODEL)")
    ] = None,
    stale_after: Annotated[
        float,
        typer.Option(help="also retry unfinished transcripts older than this many seconds"),
    ] = 3600.0,
) -> None:
    """Re-run consolidations whose model call failed (transcripts kept in <home>/pending)."""
    try:
        spec = model or Settings.load().model
    except RetinueError as exc:
        raise _fail(str(exc)) from None
    if not spec:
        raise _fail("no model to consolidate with: pass --model or set RETINUE_MODEL")
    from retinue.llm.resolve import resolve_model

    try:
        chosen: Model = resolve_model(spec)
    except ConfigError as exc:
        raise _fail(str(exc)) from None
    with _memory() as store:
        report = _run(lambda: store.retry_pending(lambda _: chosen, stale_after=stale_after))
    for session_id in report.applied:
        _out.print(f"[green]applied[/green] {escape(session_id)}")
    for session_id, error in report.failed:
        _err.print(f"[red]failed[/red] {escape(session_id)}: {escape(error)}")
    if not report.applied and not report.failed:
        _out.print("nothing to retry")
    if report.failed:
        raise typer.Exit(1)
