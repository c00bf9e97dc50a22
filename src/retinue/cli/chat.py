"""The ``retinue chat`` REPL: one conversation with the main agent, across turns.

Turns run on one persistent event loop (``asyncio.Runner``), so interactive sessions kept
with ``--keep-sessions`` live across messages. Ctrl-C during a turn cancels that turn only
(the runner cancels the running task; the conversation stays usable); Ctrl-C at the prompt
just shows how to leave, Ctrl-D leaves on a fresh line.

The sessions a turn opened end with it, but the turn does not wait for their memory to be
consolidated (``consolidate_later``): the conversation owns those closes, and while the user
types at the prompt the event loop runs them in a helper thread (:class:`_LoopWhileReading`);
what they print meanwhile waits until the line is read (:class:`~retinue.cli.term.Deferred`),
so it never runs into the line being edited. ``/exit`` (and ``/new``) wait for them with a
spinner; Ctrl-C then stops every consolidation at once, each transcript kept in ``pending/``
for ``retinue memory retry``.

The prompt is a line editor with history (see :mod:`retinue.cli.lineedit`). The main agent's
text streams to stdout, wrapped at word boundaries on a terminal; progress, token counts and
warnings go to stderr, each on a line of its own (:class:`~retinue.cli.term.LineDiscipline`),
and all of it is escaped (:mod:`retinue.cli.term`: nothing in it a terminal acts on). What is
typed while a turn runs is not echoed (it would run into the spinner): it stays in the
terminal's input and the next prompt reads it.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import textwrap
import threading
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import asdict
from typing import Any, TypeVar

from rich.markdown import Markdown
from rich.table import Table

from retinue._tasks import cancel_and_wait
from retinue.cli.lineedit import HISTORY_FILE, LineReader
from retinue.cli.render import (
    EventPrinter,
    ModelSpinner,
    one_line,
    prepare_model,
    task_table,
    todos_cell,
)
from retinue.cli.term import (
    Deferred,
    LineDiscipline,
    console,
    escape,
    for_terminal,
    quiet_input,
    route_logs,
)
from retinue.errors import RetinueError
from retinue.events import TEXT_DELTA, Event, EventSink
from retinue.memory.consolidate import ConsolidationScope, consolidation_scope
from retinue.messages import Content, MediaPart, user_content
from retinue.runtime import Conversation, Runtime
from retinue.subagents.tasklist import task_lists
from retinue.telemetry.prices import format_cost

__all__ = ["COMMANDS", "ChatRepl", "consolidating_text"]

T = TypeVar("T")

COMMANDS = {  # the chat's commands, as /help writes them: /help lists them, Tab completes them
    "/exit": "leave (sessions are consolidated first; Ctrl-C there keeps them for retry)",
    "/new": "start a new conversation",
    "/sessions": "list live interactive sub-agent sessions (with their task lists) and the "
    "conversation's shared task list (TaskCreate)",
    "/compress": "summarise the older part of the conversation now",
    "/attach FILE": "send an image or PDF with the next message",
    "/help": "this list",
}

HELP = "\n".join(
    [
        *(
            textwrap.fill(what, 88, initial_indent=f"{usage:<12} ", subsequent_indent=" " * 13)
            for usage, what in COMMANDS.items()
        ),
        "Ctrl-C cancels the running turn; Ctrl-D leaves. Up/Down recall earlier messages; Tab",
        'completes a command. End a line with \\ to go on with the next, or put """ alone on a',
        "line to start and end a multi-line message; Alt-Enter starts a new line anywhere.",
    ]
)

FIRST_TRIES = (
    "Use the Glob tool to list the files here.",
    "Read the file README.md and tell me what it is for.",
)
"""What the embedded model does most reliably (benchmarks/RESULTS.md, section 7: listing
files and answering from a file, each 2 of 3 rounds; naming the tool, listing took 3 s)."""


def first_tries(model_name: str) -> str | None:
    """The chat's first-screen line of things to ask the embedded model (None: another)."""
    if not model_name.startswith("local:"):
        return None
    return "try: " + " · ".join(f'"{t}"' for t in FIRST_TRIES)


ABANDONED = (
    "[yellow]consolidation stopped: the transcripts are kept in pending/ "
    "(run `retinue memory retry`)[/]"
)


def consolidating_text(session_ids: list[str]) -> str:
    """``consolidating archivist's memory`` for sessions ``main/archivist:a``, ... (plain
    text: escape it for markup)."""
    roles = dict.fromkeys(sid.rpartition("/")[2].partition(":")[0] for sid in session_ids)
    names = " and ".join(f"{role}'s" for role in roles) or "the"
    return f"consolidating {names} memory"


class ChatRepl:
    def __init__(self, runtime: Runtime, *, keep_sessions: bool = False) -> None:
        self.runtime = runtime
        self.out = console()
        self.err = console(stderr=True)
        self.conversation: Conversation = runtime.conversation(
            keep_sessions=keep_sessions, stream=True, consolidate_later=True
        )
        self.lines = LineDiscipline(wrap=True)
        self.reader = LineReader(runtime.settings.home / HISTORY_FILE, commands=COMMANDS)
        self.deferred = Deferred()
        self.scope = ConsolidationScope()
        self._streamed = False
        self._attached: list[MediaPart] = []  # /attach: sent with the next message
        self._announced: set[str] = set()
        printer = runtime.events
        if isinstance(printer, EventPrinter):
            printer.before_line = self.lines.end_line
            self.spinner = printer.spinner
        else:
            self.spinner = ModelSpinner(self.err)
        route_logs(self.err, self.lines.end_line, deferred=self.deferred)
        self.runtime.events = lambda event: self.deferred.run(
            lambda: self._on_event(event, printer)
        )

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
        if (tries := first_tries(self.runtime.model.name)) is not None:
            self.err.print(f"[dim]{escape(tries)}[/]", highlight=False)
        prepare_model(self.runtime.model)
        consolidation_scope.set(self.scope)  # (the runner's context is a copy of this one)
        with asyncio.Runner() as runner:
            while True:
                try:
                    message = self._read(runner)
                except KeyboardInterrupt:
                    self.err.print("[dim](/exit or Ctrl-D to leave)[/]")
                    continue
                if message is None:  # Ctrl-D (the reader left the cursor on a fresh line)
                    break
                line = message.strip()
                if not line:
                    continue
                if line.startswith("/"):
                    if not self._command(runner, line):
                        break
                    continue
                self._turn(runner, line)
            self._settle(runner, self.conversation.close(), "closing")

    def _read(self, runner: asyncio.Runner) -> str | None:
        """The next message; meanwhile the sessions ended by earlier turns go on closing."""
        ending = self.conversation.consolidating()
        if fresh := [sid for sid in ending if sid not in self._announced]:
            self._announced.update(fresh)
            text = escape(consolidating_text(fresh))
            self.err.print(f"[dim]{text} in the background…[/]", highlight=False)
        try:
            if not ending:
                return self.reader.read()
            with self.deferred.holding(), _LoopWhileReading(runner, self.conversation.settled):
                return self.reader.read()
        finally:
            self._announced.intersection_update(self.conversation.consolidating())

    def _turn(self, runner: asyncio.Runner, line: str) -> None:
        self._streamed = False
        content: Content = [line, *self._attached] if self._attached else line
        self._attached = []
        try:
            with quiet_input():
                out = runner.run(self.conversation.send(content))
        except KeyboardInterrupt:
            self._end_stream()
            self.err.print("[yellow]turn cancelled[/]")
            return
        except RetinueError as exc:
            self._end_stream()
            self.err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False)
            return
        self._end_stream()
        if out.stopped:  # max_iterations, or a call repeated after a warning
            self.err.print(f"[yellow]{escape(out.content)}[/]")
        elif out.asking:  # the agent waits in its turn: the next line is the answer
            question = escape(out.content)
            self.out.print(f"[bold yellow]?[/] {question} [dim](answer it)[/]", highlight=False)
        elif not self._streamed:
            # (links shown with their target: a model's link text may name another place)
            self.out.print(Markdown(for_terminal(out.content), hyperlinks=False))

    def _end_stream(self) -> None:
        self.lines.end_line()

    def _command(self, runner: asyncio.Runner, line: str) -> bool:
        cmd = line.split()[0]
        if cmd in ("/exit", "/quit"):
            return False
        if cmd == "/new":
            ended = self._settle(runner, self.conversation.reset(), "resetting")
            self.err.print(f"[dim]new conversation ({len(ended or [])} session(s) ended)[/]")
        elif cmd == "/sessions":
            self._tasks(runner)
            self._sessions()
        elif cmd == "/compress":
            result = self._finish(runner, self.conversation.compress(), "compressing")
            if result is None:
                self.err.print("[dim]nothing to compress[/]")
        elif cmd == "/attach":
            self._attach(line.removeprefix("/attach").strip())
        elif cmd == "/help":
            self.err.print(HELP, highlight=False, markup=False)
        else:
            self.err.print(f"unknown command {escape(cmd)}; /help lists them")
        return True

    def _attach(self, name: str) -> None:
        """Read an image or PDF (the user's own path, from the workspace) for the next message."""
        if not name:
            self.err.print("say which file: /attach FILE")
            return
        try:
            _, parts = user_content([self.runtime.settings.workspace / name])
        except (RetinueError, OSError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            self.err.print(f"[red]not attached:[/] {escape(name)}: {escape(reason)}")
            return
        self._attached += parts
        self.err.print(f"[dim]attached {escape(parts[0].label)}; sent with your next message[/]")

    def _finish(self, runner: asyncio.Runner, coro: Coroutine[Any, Any, T], what: str) -> T | None:
        try:
            with quiet_input():
                return runner.run(coro)
        except KeyboardInterrupt:
            self.err.print(f"[yellow]{what} interrupted[/]")
        except RetinueError as exc:
            self.err.print(f"[red]error while {what}:[/] {escape(str(exc))}", highlight=False)
        return None

    def _settle(self, runner: asyncio.Runner, coro: Coroutine[Any, Any, T], what: str) -> T | None:
        """Run ``coro`` (a close or reset, which consolidates sessions) with a spinner naming
        the memory being consolidated; Ctrl-C stops every consolidation at once, keeping
        their transcripts for ``retinue memory retry``, and lets ``coro`` finish."""
        ending = [s.id for s in self.runtime.manager.sessions(self.conversation.agent_id)]
        ending += self.conversation.consolidating()
        if not ending or self.runtime.memory is None:
            return self._finish(runner, coro, what)
        doing = f"{consolidating_text(ending)}… (Ctrl-C keeps it for later)"
        self.lines.end_line()
        if not self.err.is_terminal:  # (the spinner shows only on a terminal)
            self.err.print(f"[dim]{escape(doing)}[/]", highlight=False)
        self.spinner.start("", doing)
        try:
            result = self._finish(runner, self._abandoning_on_cancel(coro), what)
        finally:
            self.spinner.stop()
        if result is None:
            return None
        value, abandoned = result
        if abandoned:
            self.err.print(ABANDONED)
        return value

    async def _abandoning_on_cancel(self, coro: Coroutine[Any, Any, T]) -> tuple[T, bool]:
        """``coro``'s result, and whether a cancellation (Ctrl-C) abandoned the
        consolidations on the way: ``coro`` itself is never cut short."""
        work = asyncio.ensure_future(coro)
        try:
            return await asyncio.shield(work), False
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            self.scope.abandon()
            try:
                await asyncio.wait({work})
            finally:
                self.scope.resume()
            return work.result(), True

    def _tasks(self, runner: asyncio.Runner) -> None:
        """The conversation's shared task list (TaskCreate, TaskUpdate), if it has one."""
        tenant, team = self.runtime.settings.tenant, self.conversation.agent_id
        lists = self._finish(runner, task_lists(self.runtime.memory, tenant, [team]), "reading")
        for tasks in (lists or {}).values():
            self.err.print(task_table(team, [asdict(t) for t in tasks]))

    def _sessions(self) -> None:
        infos = self.runtime.manager.sessions()
        ending = self.conversation.consolidating()
        if not infos and not ending:
            self.err.print("[dim]no live interactive sessions[/]")
            return
        table = Table()
        widest = max([len(s.id) for s in infos] + [len(sid) for sid in ending])
        table.add_column("session", no_wrap=True, min_width=widest)
        for header in ("role", "state", "turns", "tokens", "cost", "background", "tasks",
                       "last reply"):  # fmt: skip
            table.add_column(header)
        for s in infos:
            bg = f"{s.background} running, {s.unread} unread" if s.background or s.unread else ""
            table.add_row(
                escape(s.id), escape(s.role), s.state, str(s.turns), str(s.tokens),
                format_cost(s.cost_usd), bg,
                todos_cell(s.todos), escape(one_line(s.last_reply)),
            )  # fmt: skip
        for sid in ending:
            role = sid.rpartition("/")[2].partition(":")[0]
            table.add_row(escape(sid), escape(role), "consolidating", "", "", "", "", "", "")
        console(file=sys.stderr).print(table)


class _LoopWhileReading:
    """Runs ``runner``'s event loop in a helper thread while the main thread reads a line, so
    that ``work()`` (and every task the loop holds) goes on meanwhile. Leaving stops the
    loop (``work`` is only waited for, never cancelled) and joins the thread, so the main
    thread has the loop to itself again."""

    def __init__(self, runner: asyncio.Runner, work: Callable[[], Awaitable[None]]) -> None:
        self._runner, self._work = runner, work
        self._stop: asyncio.Future[None] = runner.get_loop().create_future()
        self._thread = threading.Thread(target=self._run, name="retinue chat loop", daemon=True)

    def __enter__(self) -> None:
        self._thread.start()

    def __exit__(self, *exc: object) -> None:
        self._runner.get_loop().call_soon_threadsafe(self._stopped)
        interrupted = False
        while self._thread.is_alive():  # a Ctrl-C now must not leave the loop running there
            try:
                self._thread.join()
            except KeyboardInterrupt:
                interrupted = True
        if interrupted:
            raise KeyboardInterrupt

    def _stopped(self) -> None:
        if not self._stop.done():
            self._stop.set_result(None)

    def _run(self) -> None:
        with contextlib.suppress(Exception):  # (work() only waits: nothing of it is lost)
            self._runner.run(self._until_stopped())

    async def _until_stopped(self) -> None:
        job = asyncio.ensure_future(self._work())
        try:
            await asyncio.wait({job, self._stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await cancel_and_wait(job)
