"""Terminal rendering of progress events as an indented tree on stderr.

Indentation follows the agent id: ``main`` at the left, ``main/reviewer`` one step in,
``main/reviewer/tester`` two steps, so nested sub-agent work reads as a tree. What an event
carries (a model's, a tool's or a hook's text) is shown through :func:`retinue.cli.term.escape`.
"""

from __future__ import annotations

import contextlib
import json
import reprlib
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.status import Status
from rich.table import Table
from rich.text import Text

from retinue import events as ev
from retinue.cli.term import escape, for_terminal
from retinue.errors import RetinueError
from retinue.events import Event
from retinue.telemetry.prices import format_cost
from retinue.tools.builtin.todo import TodoItem, todo_line, todos_done

__all__ = [
    "EventPrinter",
    "ModelSpinner",
    "one_line",
    "parse_todos",
    "prepare_model",
    "task_table",
    "todos_cell",
]


def _depth(agent_id: str) -> int:
    return agent_id.count("/")


_ARGS_PARSED = 64_000  # characters of arguments parsed for a preview (beyond: shown raw, cut)
_ARGS_REPR = reprlib.Repr()
_ARGS_REPR.maxlevel, _ARGS_REPR.maxstring, _ARGS_REPR.maxother = 3, 60, 60
_ARGS_REPR.maxlist = _ARGS_REPR.maxdict = _ARGS_REPR.maxtuple = 6


def _args_preview(arguments: str, limit: int = 80) -> str:
    """A tool call's arguments on one line of at most ``limit`` characters. Model output:
    bounded before it is parsed, nesting shown to three levels, never a recursion."""
    try:
        if len(arguments) > _ARGS_PARSED:
            raise ValueError("too long to parse for a preview")
        data = json.loads(arguments)
        items = data.items() if isinstance(data, dict) else ()
        text = (
            ", ".join(f"{k[:40]}={_ARGS_REPR.repr(v)}" for k, v in items)
            if items
            else _ARGS_REPR.repr(data)
        )
    except (ValueError, RecursionError):  # not JSON, too long, or nested too deeply
        text = arguments[: limit + 1]
    text = one_line(text, 10 * limit)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _tokens(data: dict[str, Any]) -> str:
    """``1,234 in / 56 out tokens, 2.1s (compress)`` for a finished model call."""
    seconds = data.get("seconds")
    took = f", {seconds:.1f}s" if isinstance(seconds, int | float) else ""
    purpose = f" ({escape(str(data['purpose']))})" if data.get("purpose") else ""
    cost = data.get("cost_usd")  # present (None: the price is unknown) for the run's calls
    money = f", {format_cost(cost if isinstance(cost, int | float) else None)}"
    return (
        f"{data.get('input_tokens', 0):,} in / {data.get('output_tokens', 0):,} out tokens"
        f"{money if 'cost_usd' in data else ''}{took}{purpose}"
    )


def one_line(text: str, limit: int = 60) -> str:
    """``text`` on one line (whitespace runs made one space), cut to ``limit`` with ``…``."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def parse_todos(raw: Any) -> list[TodoItem]:
    """The task items of a session's JSON (``todos``), leaving out any that are not one."""
    items: Iterable[Any] = raw if isinstance(raw, list) else ()
    out: list[TodoItem] = []
    for item in items:
        try:
            out.append(TodoItem.model_validate(item))
        except ValueError:
            continue
    return out


def todos_cell(todos: Sequence[TodoItem], limit: int = 6, width: int = 50) -> str:
    """A session's task list for a table cell, as escaped markup: ``2 of 5 done``, then the
    unfinished tasks (at most ``limit``, each cut to ``width`` characters on one line)."""
    if not todos:
        return ""
    open_ = [t for t in todos if t.status != "completed"]
    lines = [todos_done(todos)]
    lines += [escape(one_line(todo_line(item), width)) for item in open_[:limit]]
    if len(open_) > limit:
        lines.append(f"… {len(open_) - limit} more")
    return "\n".join(lines)


def task_table(team: str, tasks: Sequence[Mapping[str, Any]], limit: int = 50) -> Table:
    """A team's shared task list (``TaskList``'s tasks as JSON: id, status, subject, owner,
    blocked_by) as a table; model-written text is escaped and cut, at most ``limit`` rows."""
    done = sum(t.get("status") == "completed" for t in tasks)
    table = Table(title=escape(f"task list of {team}: {done} of {len(tasks)} done"))
    for header in ("#", "status", "subject", "owner", "blocked by"):
        table.add_column(header, no_wrap=header in ("#", "status"))
    for t in tasks[:limit]:
        blocked = t.get("blocked_by")
        after = ", ".join(f"#{i}" for i in blocked) if isinstance(blocked, list) else ""
        table.add_row(
            escape(str(t.get("id", ""))),
            escape(str(t.get("status", ""))),
            escape(one_line(str(t.get("subject", "")), 80)),
            escape(one_line(str(t.get("owner") or ""), 60)),
            escape(one_line(after, 40)),
        )
    if len(tasks) > limit:
        table.add_row("…", "", f"{len(tasks) - limit} more", "", "")
    return table


def prepare_model(model: object) -> None:
    """Assemble the embedded model's file now (``LocalModel.model_path``), if that is still
    to do, so that its progress bar has the terminal to itself: done by the first model
    call, it ran under that call's spinner, on the same line."""
    model_path = getattr(model, "model_path", None)
    if callable(model_path):
        with contextlib.suppress(RetinueError, OSError):  # the first call reports it again
            model_path()


class ModelSpinner:
    """A spinner with the elapsed time while a model call runs (on terminals only).

    It starts when a model call starts and stops at its first streamed text, its end, or the
    end of the run. :meth:`progress` takes the local model's reports (see
    :data:`retinue.llm.local.local_progress`): prompt processing first, then tokens/s.
    """

    def __init__(self, console: Console) -> None:
        self.console = console
        self._status: Status | None = None
        self._agent = ""
        self._doing = "thinking…"
        self._since = 0.0
        self._detail = ""

    def on_event(self, event: Event) -> None:
        if event.kind == ev.MODEL_STARTED:
            self.start(event.agent_id)
        elif event.kind in _SPINNER_STOPS:
            self.stop()

    def start(self, agent_id: str, doing: str = "thinking…") -> None:
        """Show ``<agent_id> <doing> <seconds>s`` (plain text, never markup)."""
        self._agent, self._doing = agent_id, doing
        self._since, self._detail = time.monotonic(), ""
        if self._status is None and self.console.is_terminal:
            self._status = Status(self, console=self.console, spinner="dots")
            self._status.start()

    def progress(self, report: dict[str, Any]) -> None:
        """Counts as the token line will show them: ``1,234`` prompt tokens (the prompt the
        reply answers, the last one reported), generated tokens so far."""
        stage = report.get("progress")
        tokens = report.get("prompt_tokens")
        if stage == "prompt":
            count = f"{tokens:,}" if isinstance(tokens, int) else "?"
            self._detail = f"reading the prompt ({count} tokens)"
        elif stage == "generating":
            made, seconds = report.get("tokens"), report.get("seconds")
            count = f", {made:,} tokens" if isinstance(made, int) else ""
            rate = (
                f", {made / seconds:.1f} tokens/s"
                if isinstance(made, int) and isinstance(seconds, float) and seconds > 0
                else ""
            )
            self._detail = f"generating{count}{rate}"

    def stop(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None

    def __rich__(self) -> Text:
        elapsed = time.monotonic() - self._since
        detail = f" · {self._detail}" if self._detail else ""
        who = f"{self._agent} " if self._agent else ""
        return Text(for_terminal(f"{who}{self._doing} {elapsed:.0f}s{detail}"), style="dim")


_SPINNER_STOPS = frozenset({ev.TEXT_DELTA, ev.MODEL_CALLED, ev.RUN_FINISHED, ev.TOOL_STARTED})
_UNANSWERED = ("cancelled", "max_iterations", "repeated_call")  # a run that ended so


class EventPrinter:
    """An event sink that prints agent, tool and session activity to a console."""

    def __init__(self, console: Console, *, main_text: bool = False) -> None:
        self.console = console
        self.main_text = main_text
        self.streamed = False
        self.spinner = ModelSpinner(console)
        self.before_line: Callable[[], None] | None = None  # e.g. end a streamed text line

    def pause(self) -> None:
        """Before a question on the terminal (an approval): end a streamed line, stop the
        spinner (the next model call starts it again)."""
        if self.before_line is not None:
            self.before_line()
        self.spinner.stop()

    def __call__(self, event: Event) -> None:
        line = self.describe(event)
        if self.before_line is not None and (line is not None or event.kind == ev.MODEL_STARTED):
            self.before_line()
        self.spinner.on_event(event)
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
                asks = f": {escape(str(d['question'])[:200])}" if d.get("question") else ""
                return f"[magenta]◆[/] session {who} {escape(str(d.get('action')))}{asks}"
            case ev.COMPRESSED if d.get("reason") == "context_edit":
                before, after = d.get("before_tokens"), d.get("after_tokens")
                cleared = f"cleared old tool results ({d.get('trimmed_results')})"
                return f"[blue]⇣[/] {who} {cleared}: {before} → {after} tokens"
            case ev.COMPRESSED:
                before, after = d.get("before_tokens"), d.get("after_tokens")
                return f"[blue]⇣[/] {who} compressed its context: {before} → {after} tokens"
            case ev.CONSOLIDATED if d.get("ok"):
                return f"[green]✓[/] {who} memory consolidated"
            case ev.CONSOLIDATED:
                return f"[red]✗[/] {who} consolidation failed: {escape(str(d.get('error')))}"
            case ev.MODEL_CALLED if isinstance(d.get("input_tokens"), int):
                # a sub-agent's line names it: parallel instances (a:x, a:y) read apart
                whose = f"{who} " if _depth(event.agent_id) else ""
                return f"[dim]· {whose}{_tokens(d)}[/]"
            case ev.NOTICE:
                return f"[dim]{escape(str(d.get('text')))}[/]"
            case ev.LIMIT_REACHED:  # a fan-out cap or loop (retinue.subagents.caps)
                what = escape(f"{d.get('limit')}={d.get('value')}")
                stops = ": the turn stops" if d.get("stopped") else ""
                return f"[red]■[/] {who} limit reached: {what}{stops}"
            case ev.RUN_FINISHED if d.get("stop_reason") in _UNANSWERED:
                return f"[red]■[/] {who} {escape(str(d['stop_reason']))}"
        return None
