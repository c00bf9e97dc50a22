"""The ``retinue chat`` REPL: one conversation with the main agent, across turns.

Turns run on one persistent event loop (``asyncio.Runner``), so interactive sessions kept
with ``--keep-sessions`` live across messages. Ctrl-C during a turn cancels that turn only
(the runner cancels the running task; the conversation stays usable); Ctrl-C at the prompt
just shows how to leave, Ctrl-D leaves on a fresh line.

The prompt is a line editor with history (see :mod:`retinue.cli.lineedit`). The main agent's
text streams to stdout; progress, token counts and warnings go to stderr, each on a line of
its own (:class:`~retinue.cli.term.LineDiscipline`), and all of it is escaped.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Coroutine
from typing import Any, TypeVar

from rich.markdown import Markdown
from rich.markup import escape
from rich.table import Table

from retinue.cli.lineedit import HISTORY_FILE, LineReader
from retinue.cli.render import EventPrinter, one_line, todos_cell
from retinue.cli.term import LineDiscipline, console, route_logs
from retinue.errors import RetinueError
from retinue.events import TEXT_DELTA, Event, EventSink
from retinue.runtime import Conversation, Runtime

__all__ = ["ChatRepl"]

T = TypeVar("T")

HELP = """\
/exit        leave (sessions are consolidated first)
/new         start a new conversation
/sessions    list live interactive sub-agent sessions (with their task lists)
/compress    summarise the older part of the conversation now
/help        this list
Ctrl-C cancels the running turn; Ctrl-D leaves. Up/Down recall earlier messages.
End a line with \\ to go on with the next, or put \"\"\" alone on a line to start and end a
multi-line message."""


class ChatRepl:
    def __init__(self, runtime: Runtime, *, keep_sessions: bool = False) -> None:
        self.runtime = runtime
        self.out = console()
        self.err = console(stderr=True)
        self.conversation: Conversation = runtime.conversation(
            keep_sessions=keep_sessions, stream=True
        )
        self.lines = LineDiscipline()
        self.reader = LineReader(runtime.settings.home / HISTORY_FILE)
        self._streamed = False
        printer = runtime.events
        if isinstance(printer, EventPrinter):
            printer.before_line = self.lines.end_line
        route_logs(self.err, self.lines.end_line)
        self.runtime.events = lambda event: self._on_event(event, printer)

    def _on_event(self, event: Event, downstream: EventSink | None) -> None:
        """The main agent's text goes to stdout as it streams; the rest to the tree."""
        if event.kind == TEXT_DELTA and event.agent_id == self.conversation.agent_id:
            if downstream is not None:
                downstream(event)  # stops the spinner; the tree prints no text
            self._streamed = True
            self.lines.text(str(event.data.get("text", "")))
        elif downstream is not None:
            downstream(event)

    def loop(self) -> None:
        self.err.print(
            f"[dim]retinue chat · model {escape(self.runtime.model.name)} · "
            f"workspace {escape(str(self.runtime.settings.workspace))} · /help[/]",
            highlight=False,
        )
        with asyncio.Runner() as runner:
            while True:
                try:
                    message = self.reader.read()
                except KeyboardInterrupt:
                    self.err.print("\n[dim](/exit or Ctrl-D to leave)[/]")
                    continue
                if message is None:  # Ctrl-D: leave on a fresh line
                    sys.stdout.write("\n")
                    sys.stdout.flush()
                    break
                line = message.strip()
                if not line:
                    continue
                if line.startswith("/"):
                    if not self._command(runner, line):
                        break
                    continue
                self._turn(runner, line)
            self._finish(runner, self.conversation.close(), "closing")

    def _turn(self, runner: asyncio.Runner, line: str) -> None:
        self._streamed = False
        try:
            out = runner.run(self.conversation.send(line))
        except KeyboardInterrupt:
            self._end_stream()
            self.err.print("[yellow]turn cancelled[/]")
            return
        except RetinueError as exc:
            self._end_stream()
            self.err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False)
            return
        self._end_stream()
        if out.stop_reason == "max_iterations":
            self.err.print(f"[yellow]{escape(out.content)}[/]")
        elif out.asking:  # the agent waits in its turn: the next line is the answer
            question = escape(out.content)
            self.out.print(f"[bold yellow]?[/] {question} [dim](answer it)[/]", highlight=False)
        elif not self._streamed:
            self.out.print(Markdown(out.content))

    def _end_stream(self) -> None:
        self.lines.end_line()

    def _command(self, runner: asyncio.Runner, line: str) -> bool:
        cmd = line.split()[0]
        if cmd in ("/exit", "/quit"):
            return False
        if cmd == "/new":
            ended = self._finish(runner, self.conversation.reset(), "resetting")
            self.err.print(f"[dim]new conversation ({len(ended or [])} session(s) ended)[/]")
        elif cmd == "/sessions":
            self._sessions()
        elif cmd == "/compress":
            result = self._finish(runner, self.conversation.compress(), "compressing")
            if result is None:
                self.err.print("[dim]nothing to compress[/]")
        elif cmd == "/help":
            self.err.print(HELP, highlight=False, markup=False)
        else:
            self.err.print(f"unknown command {escape(cmd)}; /help lists them")
        return True

    def _finish(self, runner: asyncio.Runner, coro: Coroutine[Any, Any, T], what: str) -> T | None:
        try:
            return runner.run(coro)
        except KeyboardInterrupt:
            self.err.print(f"[yellow]{what} interrupted[/]")
        except RetinueError as exc:
            self.err.print(f"[red]error while {what}:[/] {escape(str(exc))}", highlight=False)
        return None

    def _sessions(self) -> None:
        infos = self.runtime.manager.sessions()
        if not infos:
            self.err.print("[dim]no live interactive sessions[/]")
            return
        table = Table()
        table.add_column("session", no_wrap=True, min_width=max(len(s.id) for s in infos))
        for header in ("role", "state", "turns", "tokens", "background", "tasks", "last reply"):
            table.add_column(header)
        for s in infos:
            bg = f"{s.background} running, {s.unread} unread" if s.background or s.unread else ""
            table.add_row(
                escape(s.id), escape(s.role), s.state, str(s.turns), str(s.tokens), bg,
                todos_cell(s.todos), escape(one_line(s.last_reply)),
            )  # fmt: skip
        console(file=sys.stderr).print(table)
