"""``retinue memory``: look at and edit what roles remember, and retry kept consolidations.

``show ROLE``, ``search ROLE QUERY``, ``edit ROLE BLOCK`` and ``retry``, each with
``--tenant``; ``shared [NAME]`` and ``edit-shared NAME`` look at and edit the tenant's shared
blocks (which roles write and read each, from their role files); ``export`` and ``import``
move memory between stores as JSON lines, tenant by tenant. The store comes from
:class:`~retinue.config.Settings`: PostgreSQL when ``database_url`` / ``RETINUE_DATABASE_URL``
is set, else SQLite in the data directory (``RETINUE_HOME``); ``--sqlite`` picks the data
directory's SQLite file anyway (to move it into PostgreSQL: ``retinue memory export --sqlite |
retinue memory import -``). Errors are one line on stderr and exit code 1.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import click
import typer

from retinue.cli.term import console, escape, write_data
from retinue.errors import RetinueError

if TYPE_CHECKING:  # settings, the store and the providers load only when a command runs
    from retinue.llm.base import Model
    from retinue.memory import MemoryBackend
    from retinue.memory.consolidate import ConsolidationResult
    from retinue.memory.pending import PendingTranscript
    from retinue.memory.store import Block, SharedBlock
    from retinue.subagents.roles import Role

__all__ = ["memory_app"]

memory_app = typer.Typer(
    name="memory", help="Inspect and edit the long-term memory of roles.", no_args_is_help=True
)

_out = console()
_err = console(stderr=True)
T = TypeVar("T")

Tenant = Annotated[str, typer.Option("--tenant", help="whose memory (tenant name)")]
_SQLITE_HELP = "the data directory's SQLite store, even when a database_url is set"
Sqlite = Annotated[bool, typer.Option("--sqlite", help=_SQLITE_HELP)]
Value = Annotated[str | None, typer.Option("--value", help="new text; without it, $EDITOR opens")]


def _fail(message: str) -> typer.Exit:
    _err.print(f"[red]error:[/red] {escape(message)}")
    return typer.Exit(1)


@contextmanager
def _memory(sqlite: bool = False) -> Iterator[tuple[MemoryBackend, _Runner]]:
    """The configured store, and a runner for its coroutines (one event loop throughout,
    which a PostgreSQL connection pool needs)."""
    from retinue.config import Settings
    from retinue.memory import open_store

    try:
        settings = Settings.load()
        store = open_store(settings.home, None if sqlite else settings.database_url)
    except RetinueError as exc:
        raise _fail(str(exc)) from None
    runner = _Runner()
    try:
        yield store, runner
    except RetinueError as exc:
        raise _fail(str(exc)) from None
    finally:
        runner.close(store)


class _Runner:
    """Runs coroutines on one event loop kept for a command."""

    def __init__(self) -> None:
        self._runner = asyncio.Runner()

    def __call__(self, factory: Callable[[], Coroutine[Any, Any, T]]) -> T:
        return self._runner.run(factory())

    def close(self, store: MemoryBackend) -> None:
        from retinue.memory import PostgresMemory

        try:
            if isinstance(store, PostgresMemory):
                self._runner.run(store.aclose())
            else:
                store.close()
        finally:
            self._runner.close()


@memory_app.command("show")
def show(role: str, tenant: Tenant = "default") -> None:
    """Show a role's core blocks, the shared blocks it declares, and how many archival
    passages it has."""
    declared = _declared(_roles()).get(role, ())
    names = [s.name for s in declared]
    with _memory() as (store, run):
        blocks = run(lambda: store.blocks(tenant, role))
        count = run(lambda: store.passage_count(tenant, role))
        shared = run(lambda: store.shared_blocks(tenant, names)) if names else []
    if not count and not any(b.value for b in blocks) and not shared:
        _nothing_stored(role, tenant)
        return
    for b in blocks:
        _panel(b, "")
    for b, s in zip(shared, declared, strict=True):
        _panel(b, "shared, writable" if s.writable else "shared, read-only")
    _out.print(f"archival passages: [bold]{count}[/bold]  (tenant {escape(tenant)!r})")


def _panel(block: Block, what: str) -> None:
    from rich.panel import Panel

    size = f"{len(block.value)}/{block.limit} chars"
    title = f"{escape(block.name)} [dim]({escape(what + ', ' if what else '')}{size})[/dim]"
    body = escape(block.value) or "[dim](empty)[/dim]"
    _out.print(Panel(body, title=title, title_align="left"))


def _roles() -> dict[str, Role]:
    """The roles defined here ({} when they cannot be loaded)."""
    from retinue.config import Settings
    from retinue.runtime import load_roles

    try:
        return dict(load_roles(Settings.load()).roles)
    except RetinueError:
        return {}


def _declared(roles: dict[str, Role]) -> dict[str, tuple[SharedBlock, ...]]:
    """The shared blocks each role declares, by role (roles with none left out)."""
    return {name: r.shared_memory for name, r in roles.items() if r.shared_memory}


@memory_app.command("shared")
def shared(
    name: Annotated[str | None, typer.Argument(help="one shared block (default: all)")] = None,
    tenant: Tenant = "default",
) -> None:
    """Show the tenant's shared blocks: stored or declared, with the roles that write and
    read each (their role files' ``memory: {shared: [...]}``)."""
    declared = _declared(_roles())
    users: dict[str, list[tuple[str, bool]]] = {}
    for role, blocks in sorted(declared.items()):
        for s in blocks:
            users.setdefault(s.name, []).append((role, s.writable))
    with _memory() as (store, run):
        stored = run(lambda: store.shared_blocks(tenant))
        known = sorted({*(b.name for b in stored), *users})
        chosen = [name] if name is not None else known
        if name is not None and name not in known:
            raise _fail(f"no shared block {name!r} (tenant {tenant!r}); shared blocks here: "
                        f"{', '.join(known) or 'none'}")  # fmt: skip
        blocks = run(lambda: store.shared_blocks(tenant, chosen))
    if not blocks:
        _out.print(f"no shared blocks (tenant {escape(tenant)!r})")
        return
    for b in blocks:
        who = users.get(b.name, [])
        writers = ", ".join(r for r, w in who if w) or "no role"
        readers = ", ".join(r for r, w in who if not w) or "no role"
        _panel(b, "shared")
        _out.print(f"  written by: {escape(writers)}; read only by: {escape(readers)}")


@memory_app.command("edit-shared")
def edit_shared(
    name: str,
    tenant: Tenant = "default",
    value: Value = None,
) -> None:
    """Replace a shared block's text (from --value, or in $EDITOR)."""
    with _memory() as (store, run):
        if value is None:
            (current,) = run(lambda: store.shared_blocks(tenant, [name]))
            value = _in_editor(current.value)
            if value is None:
                return
        text: str = value
        b = run(lambda: store.edit_shared_block(tenant, name, lambda _: text))
    _out.print(f"saved shared {escape(repr(b.name))} ({len(b.value)}/{b.limit} chars)")


def _in_editor(text: str) -> str | None:
    """``text`` as edited in $EDITOR; None (and "unchanged" said) when it was not saved."""
    edited = click.edit(text, extension=".md")
    if edited is None:
        _out.print("unchanged")
        return None
    return edited.rstrip("\n")


def _nothing_stored(role: str, tenant: str) -> None:
    """Say that ``role`` has no memory; an error when no role of that name exists here."""
    _known_role(role, tenant)
    _out.print(f"{escape(role)} has no memory yet (tenant {escape(tenant)!r})")


def _known_role(role: str, tenant: str) -> None:
    """Exit 1 with the roles there are when no role named ``role`` exists here."""
    known = ["main", *_roles()]
    if role not in known:
        names = ", ".join(sorted(known)[:20]) or "none"
        raise _fail(f"no role named {role!r} has memory (tenant {tenant!r}); roles here: {names}")


@memory_app.command("search")
def search(
    role: str,
    query: str,
    tenant: Tenant = "default",
    limit: Annotated[int, typer.Option(min=1, max=100, help="most passages to show")] = 10,
) -> None:
    """Search a role's archival memory."""
    with _memory() as (store, run):
        hits = run(lambda: store.search(tenant, role, query, limit))
        count = 0 if hits else run(lambda: store.passage_count(tenant, role))
    if not hits:
        if not count:
            _known_role(role, tenant)  # an error for a role that does not exist here
        _out.print(f"no passages match {escape(query)!r}")
        return
    for p in hits:
        _out.print(f"[bold]#{p.id}[/bold] [dim]{escape(p.source)}[/dim]\n  {escape(p.content)}")


@memory_app.command("edit")
def edit(
    role: str,
    block: str,
    tenant: Tenant = "default",
    value: Value = None,
) -> None:
    """Replace a core block's text (from --value, or in $EDITOR)."""
    with _memory() as (store, run):
        if value is None:
            current = {b.name: b.value for b in run(lambda: store.blocks(tenant, role))}
            if block not in current:
                raise _fail(f"unknown block {block!r}; blocks are: {', '.join(current)}")
            value = _in_editor(current[block])
            if value is None:
                return
        text: str = value
        b = run(lambda: store.set_block(tenant, role, block, text))
    _out.print(f"saved {escape(repr(b.name))} ({len(b.value)}/{b.limit} chars)")


@memory_app.command("retry")
def retry(
    model: Annotated[
        str | None,
        typer.Option("--model", help="provider:model (default: the model chat and run use)"),
    ] = None,
    stale_after: Annotated[
        float,
        typer.Option(help="also retry unfinished transcripts older than this many seconds"),
    ] = 3600.0,
) -> None:
    """Re-run consolidations whose model call failed (transcripts kept in <home>/pending, or
    in the PostgreSQL database), with the model chat and run would use unless --model says.
    Each transcript gets a line as it starts and as it ends (a spinner on a terminal)."""
    from retinue.config import Settings
    from retinue.llm.local import local_progress
    from retinue.llm.resolve import resolve_model
    from retinue.memory.consolidate import retry_pending
    from retinue.runtime import choose_model

    try:
        spec, notice = (model, None) if model else choose_model(Settings.load())
        chosen: Model = resolve_model(spec)
    except RetinueError as exc:
        raise _fail(str(exc)) from None
    if notice:
        _err.print(f"[dim]{escape(notice)}[/dim]")
    shown = _RetryLines(chosen.name)
    local_progress.set(shown.spinner.progress)  # (before the runner copies this context)
    declared = _declared(_roles())  # a role's consolidation writes its shared blocks too
    with _memory() as (store, run):
        try:
            report = run(
                lambda: retry_pending(
                    store,
                    lambda _: chosen,
                    stale_after=stale_after,
                    progress=shown,
                    shared_for=lambda role: declared.get(role, ()),
                )
            )
        finally:
            shown.spinner.stop()
    if not report.applied and not report.failed:
        _out.print("nothing to retry")
    if report.failed:
        raise typer.Exit(1)


class _RetryLines:
    """``retinue memory retry``'s progress: one line per kept transcript as it begins (a
    spinner with the elapsed time on a terminal), one as it ends."""

    def __init__(self, model: str) -> None:
        from retinue.cli.render import ModelSpinner

        self.model = model
        self.spinner = ModelSpinner(_err)
        self._began = 0.0

    def __call__(
        self, n: int, total: int, item: PendingTranscript, result: ConsolidationResult | None
    ) -> None:
        if result is None:
            self._began = time.monotonic()
            doing = f"[{n}/{total}] {item.session_id} ({item.role}'s memory, tenant "
            doing += f"{item.tenant}): consolidating with {self.model}…"
            if _err.is_terminal:
                self.spinner.start("", doing)
            else:
                _err.print(escape(doing), highlight=False)
            return
        self.spinner.stop()
        took = f"{time.monotonic() - self._began:.1f} s"
        who = escape(item.session_id)
        if result.ok:
            wrote = f"{result.passages_added} passage(s), {result.blocks_updated} block(s)"
            _out.print(f"[green]applied[/green] {who} ({wrote}, {took})")
        else:
            _err.print(f"[red]failed[/red] {who}: {escape(result.error)} ({took})")


@memory_app.command("export")
def export(
    tenant: Annotated[
        str | None, typer.Option("--tenant", help="only this tenant (default: all)")
    ] = None,
    output: Annotated[
        str, typer.Option("--output", "-o", help="file to write (default: standard output)")
    ] = "-",
    sqlite: Sqlite = False,
) -> None:
    """Write memory (blocks, passages, consolidations, conversations) as JSON lines."""
    from retinue.memory.transfer import export_lines

    async def write(store: MemoryBackend, out: Any) -> int:
        n = 0
        async for line in export_lines(store, tenant):
            write_data(out, line + "\n")
            n += 1
        return n

    with _memory(sqlite) as (store, run):
        if output == "-":
            lines = run(lambda: write(store, sys.stdout))
        else:
            try:
                with open(output, "w", encoding="utf-8") as out:
                    lines = run(lambda: write(store, out))
            except OSError as exc:
                raise _fail(f"cannot write {output}: {exc.strerror}") from None
    _err.print(f"exported {lines - 1} records")


@memory_app.command("import")
def import_(
    source: Annotated[str, typer.Argument(help="an export file, or - for standard input")],
    tenant: Annotated[
        str | None, typer.Option("--tenant", help="only this tenant's records (default: all)")
    ] = None,
    sqlite: Sqlite = False,
) -> None:
    """Read an export into the store (importing it twice changes nothing more)."""
    from retinue.memory.transfer import import_lines

    with _memory(sqlite) as (store, run):
        if source == "-":
            counts = run(lambda: import_lines(store, sys.stdin, tenant))
        else:
            try:
                with open(source, encoding="utf-8") as lines:
                    counts = run(lambda: import_lines(store, lines, tenant))
            except (OSError, UnicodeDecodeError) as exc:
                raise _fail(f"cannot read {source}: {exc}") from None
    done = ", ".join(f"{n} {kind}s" for kind, n in sorted(counts.written.items())) or "nothing"
    refused = f"; refused {len(counts.refused)}" if counts.refused else ""
    _out.print(f"imported {done}; skipped {counts.skipped}{refused}")
    for line in counts.refused:  # the rest is imported; these need splitting by hand
        _err.print(f"[red]refused:[/red] {escape(line)}")
    if counts.refused:
        raise typer.Exit(1)
