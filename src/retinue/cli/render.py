"""Terminal rendering of progress events as an indented tree on stderr.

Indentation follows the agent id: ``main`` at the left, ``main/reviewer`` one step in,
``main/reviewer/tester`` two steps, so nested sub-agent work reads as a tree.
"""

from __future__ import annotations

import json

from rich.console import Console
from rich.markup import escape

from retinue import events as ev
from retinue.events import Event

__all__ = ["EventPrinter"]


def _depth(agent_id: str) -> int:
    return agent_id.count("/")


def _args_preview(arguments: str, limit: int = 80) -> str:
    try:
        data = json.loads(arguments)
    except json.JSONDecodeError:
        return arguments[:limit]
    items = data.items() if isinstance(data, dict) else ()
    text = ", ".join(f"{k}={v!r}" for k, v in items) if items else str(data)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class EventPrinter:
    """An event sink that prints agent, tool and session activity to a console."""

    def __init__(self, console: Console, *, main_text: bool = False) -> None:
        self.console = console
        self.main_text = main_text
        self.streamed = False

    def __call__(self, event: Event) -> None:
        line = self.describe(event)
        if line is not None:
            pad = "  " * _depth(event.agent_id)
            self.console.print(f"{pad}{line}", highlight=False)

    def describe(self, event: Event) -> str | None:
        d = event.data
        who = escape(event.agent_id)
        match event.kind:
            case ev.RUN_STARTED if d.get("depth"):
                return f"[cyan]●[/] {who} [dim]started ({escape(str(d.get('role')))})[/]"
            case ev.TOOL_STARTED:
                args = escape(_args_preview(str(d.get("arguments", ""))))
                return f"[yellow]→[/] {escape(str(d['name']))}[dim]({args})[/]"
            case ev.TOOL_FINISHED if d.get("is_error"):
                return f"[red]✗ {escape(str(d['name']))}:[/] {escape(str(d.get('preview', '')))}"
            case ev.SESSION:
                return f"[magenta]◆[/] session {who} {escape(str(d.get('action')))}"
            case ev.COMPRESSED:
                before, after = d.get("before_tokens"), d.get("after_tokens")
                return f"[blue]⇣[/] {who} compressed its context: {before} → {after} tokens"
            case ev.CONSOLIDATED:
                ok = d.get("ok")
                state = "memory consolidated" if ok else f"consolidation failed: {d.get('error')}"
                return f"[green]✓[/] {who} {escape(state)}"
            case ev.RUN_FINISHED if d.get("stop_reason") in ("cancelled", "max_iterations"):
                return f"[red]■[/] {who} {escape(str(d['stop_reason']))}"
        return None
