"""``retinue sessions --ended``, ``retinue sessions show ID`` and ``retinue sessions search
TEXT``: the transcripts of ended sessions (see :mod:`retinue.store.transcripts`).

They read the store of this data directory (PostgreSQL when ``database_url`` is set), for the
settings' tenant, whether or not a service runs: what ``retinue run``, ``retinue chat`` and
``retinue serve`` kept there. Every text shown came from a model, a tool or a person: it is
escaped before it reaches the console. Errors are one line on stderr and exit code 1.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

import typer

from retinue.cli.term import console, echo, escape
from retinue.errors import RetinueError

if TYPE_CHECKING:
    from rich.console import Console

    from retinue.memory import MemoryBackend
    from retinue.store.transcripts import Transcript, TranscriptStore, TranscriptSummary

__all__ = ["ended", "search", "show"]

T = TypeVar("T")
SHOWN_CHARS = 2000
"""Characters of one entry shown by ``show`` (``--json`` gives them whole)."""


def _with_store(act: Callable[[TranscriptStore, str], Coroutine[Any, Any, T]]) -> T:
    """``act(store, tenant)`` run on this data directory's transcripts."""
    import asyncio

    from retinue.config import Settings
    from retinue.memory import PostgresMemory, open_store

    async def run(store: MemoryBackend, tenant: str) -> T:
        try:
            return await act(store.transcripts, tenant)
        finally:
            if isinstance(store, PostgresMemory):
                await store.aclose()
            else:
                store.close()

    try:
        settings = Settings.load()
        store = open_store(settings.home, settings.database_url)
        return asyncio.run(run(store, settings.tenant))
    except RetinueError as exc:
        console(stderr=True).print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(1) from None


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


def _lines(out: Console, summaries: list[TranscriptSummary], title: str) -> None:
    """One line per transcript (never a table: its id is never cut, in any width)."""
    from retinue.telemetry.prices import format_cost

    out.print(f"[bold]{title}[/bold]")
    for s in summaries:
        parent = f" under {escape(s.parent_id)}" if s.parent_id else ""
        out.print(
            f"{escape(s.id)}  {escape(s.session_id)}  {escape(s.role)} ({escape(s.kind)}{parent})"
            f"  {s.turns} turns, {s.tool_calls} calls, {s.input_tokens + s.output_tokens} tokens,"
            f" {format_cost(s.cost_usd)}  {escape(s.outcome)}  ended {_when(s.ended_at)}"
        )


def ended(*, as_json: bool = False, limit: int = 100) -> None:
    """List the kept transcripts, the latest ended first."""

    async def act(store: TranscriptStore, tenant: str) -> list[TranscriptSummary]:
        return await store.ended(tenant, limit=limit)

    summaries = _with_store(act)
    if as_json:
        echo(json.dumps([s.to_dict() for s in summaries], indent=2))
    elif not summaries:
        console().print("no ended sessions kept")
    else:
        _lines(console(), summaries, "ended sessions")


def show(tid: str, *, as_json: bool = False) -> None:
    """Print one transcript: its summary, its entries, and the sessions it started."""
    from retinue.store.transcripts import children_of, valid_transcript_id

    if not valid_transcript_id(tid):
        console(stderr=True).print(f"[red]error:[/red] bad transcript id {escape(tid)!r}")
        raise typer.Exit(1)

    async def act(
        store: TranscriptStore, tenant: str
    ) -> tuple[Transcript | None, list[TranscriptSummary]]:
        found = await store.get(tenant, tid)
        if found is None:
            return None, []
        return found, await children_of(store, tenant, found.summary)

    found, children = _with_store(act)
    if found is None:
        console(stderr=True).print(f"[red]error:[/red] no transcript {escape(tid)!r}")
        raise typer.Exit(1)
    if as_json:
        data = {**found.summary.to_dict(), "entries": found.entries,
                "children": [c.to_dict() for c in children]}  # fmt: skip
        echo(json.dumps(data, indent=2, ensure_ascii=False))
        return
    out = console()
    _print_transcript(out, found)
    if children:
        _lines(out, children, "sessions it started")


def _print_transcript(out: Console, found: Transcript) -> None:
    from retinue.telemetry.prices import format_cost

    s = found.summary
    who = f"session {escape(s.session_id)}  role {escape(s.role)}"
    out.print(f"[bold]{escape(s.id)}[/bold]  {who}  ({escape(s.kind)}, parent "
              f"{escape(s.parent_id or '-')})")  # fmt: skip
    used = f"{s.input_tokens} in / {s.output_tokens} out tokens, {format_cost(s.cost_usd)}"
    out.print(f"{s.turns} turns, {s.tool_calls} tool calls, {used}; outcome "
              f"{escape(s.outcome)}; {_when(s.started_at)} - {_when(s.ended_at)}")  # fmt: skip
    for entry in found.entries:
        role = str(entry.get("role", "?"))
        if role == "tool":
            mark = " error" if entry.get("is_error") else ""
            head = f"[{role} {entry.get('name', '')}{mark}]"
        else:
            head = f"[{role}]"
        if entry.get("reasoning"):
            out.print(f"[dim]({entry['reasoning']} reasoning part(s), not shown)[/dim]")
        text = _cut(str(entry.get("content", "")))
        if text or not entry.get("tool_calls"):
            out.print(f"[bold]{escape(head)}[/bold] {escape(text)}")
        for call in entry.get("tool_calls", ()):
            args = _cut(str(call.get("arguments", "")))
            out.print(f"[cyan]-> {escape(str(call.get('name', '')))}[/cyan] {escape(args)}")


def _cut(text: str) -> str:
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + " …"


def search(text: str, *, as_json: bool = False, limit: int = 20) -> None:
    """The transcripts that hold every word of ``text``, best first, with where."""

    async def act(store: TranscriptStore, tenant: str) -> list[Any]:
        return await store.search(tenant, text, limit=limit)

    hits = _with_store(act)
    if as_json:
        echo(json.dumps([{**h.summary.to_dict(), "snippet": h.snippet} for h in hits], indent=2))
        return
    out = console()
    if not hits:
        out.print("no transcript holds every word of that")
        return
    for h in hits:
        s = h.summary
        out.print(f"[bold]{escape(s.id)}[/bold] {escape(s.session_id)} ({escape(s.role)}, "
                  f"ended {_when(s.ended_at)})")  # fmt: skip
        out.print("  " + escape(" ".join(h.snippet.split())))
