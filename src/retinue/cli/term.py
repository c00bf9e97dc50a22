"""Terminal plumbing shared by the commands: consoles that never interpret what users, models
or files wrote, a line discipline between streamed text and progress lines, log records
routed through it, output held back while the user edits a line, and a quiet terminal while a
turn runs.

Text from outside (a model, a tool, a hook, a file, an MCP server, a remote service) reaches
the terminal only as :func:`retinue.safe_text.for_terminal` leaves it: no escape sequence, no
C1 or other control character, no bidi override (each shown, e.g. ESC as ``␛``). This module
holds the only ways the commands print, and each of them applies it:

* :func:`console` makes every console (a Rich console whose printed text, whatever the
  renderable, passes :func:`~retinue.safe_text.for_terminal` before Rich adds its own styles
  and cursor controls; it never writes a hyperlink, emoji codes are off);
* :func:`escape` makes text safe for a console's markup too (``[bold]`` stays text,
  ``archivist:b:`` stays ``archivist:b:``): printers escape what they interpolate, so that
  tables are laid out on the text as it will be shown;
* :func:`echo` and :meth:`LineDiscipline.text` write plain lines and streamed text;
  :func:`write_data` writes a data stream (an export) unchanged unless it is a terminal;
  :func:`read_line`, :func:`edit_line` (a prompt_toolkit session's) and :func:`confirm`
  ask with a prompt;
* :func:`route_logs` and :func:`safe_tracebacks` do the same for warnings (Retinue's and
  other libraries') and for the report of an uncaught exception.

``tests/cli/test_printers.py`` fails on any other way of printing in :mod:`retinue.cli`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import traceback
from collections.abc import Callable, Iterable, Iterator
from types import TracebackType
from typing import TYPE_CHECKING, Any, TextIO

from rich.cells import cell_len
from rich.console import Console
from rich.markup import escape as _markup_escape
from rich.segment import Segment

from retinue.safe_text import for_terminal

if TYPE_CHECKING:
    from prompt_toolkit import PromptSession

__all__ = [
    "Deferred",
    "LineDiscipline",
    "confirm",
    "console",
    "echo",
    "edit_line",
    "escape",
    "for_terminal",
    "local_modes",
    "quiet_input",
    "read_line",
    "route_logs",
    "safe_tracebacks",
    "write_data",
]


def console(*, stderr: bool = False, file: TextIO | None = None) -> Console:
    """A console for this program: soft wrapping, no emoji codes, no highlighting guesses,
    and nothing a terminal acts on in what it prints (see the module text)."""
    return _SafeConsole(stderr=stderr, file=file, soft_wrap=True, emoji=False, highlight=False)


class _SafeConsole(Console):
    """A console that passes the text of every segment it writes through
    :func:`for_terminal` and drops hyperlinks (OSC 8: a link's target is not what its text
    says); Rich's own control segments (the spinner's cursor moves) are kept. It overrides
    the method through which Rich writes on Linux and macOS (a private one:
    ``tests/security/test_terminal_text.py`` fails if a Rich release changes it)."""

    def _render_buffer(self, buffer: Iterable[Segment]) -> str:
        return super()._render_buffer(_safe(segment) for segment in buffer)


def _safe(segment: Segment) -> Segment:
    text, style, control = segment
    if control:
        return segment
    if style is not None and style.link:
        style = style.update_link(None)
    return Segment(for_terminal(text), style, control)


def escape(text: str) -> str:
    """``text`` made safe to interpolate into a console's markup: shown as
    :func:`for_terminal` shows it, and no ``[tag]`` in it taken for markup."""
    return _markup_escape(for_terminal(text))


def echo(text: str, *, err: bool = False, file: TextIO | None = None, end: str = "\n") -> None:
    """``text`` and ``end`` on stdout (stderr with ``err``, or ``file``), as
    :func:`for_terminal` shows it: where plain text is printed (no markup, no console)."""
    out = file or (sys.stderr if err else sys.stdout)
    out.write(for_terminal(text + end))
    out.flush()


def write_data(out: TextIO, text: str) -> None:
    """``text`` written to ``out`` as it is (an export's lines, for a file or a pipe), or as
    :func:`for_terminal` shows it when ``out`` is a terminal."""
    try:
        shown = os.isatty(out.fileno())
    except (OSError, ValueError, AttributeError):
        shown = False
    out.write(for_terminal(text) if shown else text)


def read_line(prompt: str = "") -> str:
    """A line read from stdin after ``prompt``."""
    return input(for_terminal(prompt))


def edit_line(session: PromptSession[str], prompt: str) -> str:
    """What is typed and edited in ``session`` after ``prompt`` (plain text to prompt_toolkit,
    which shows control characters in what is typed as ``^X``)."""
    return session.prompt(for_terminal(prompt))


def confirm(question: str) -> bool:
    """A yes/no question on the terminal; no is the default."""
    import typer

    return typer.confirm(for_terminal(question), default=False)


class LineDiscipline:
    """Tracks whether stdout holds a partial line (streamed text not yet ended), so that a
    progress or log line always starts on a line of its own.

    With ``wrap`` (and a terminal, or ``width`` given) streamed text is wrapped at word
    boundaries: a word that would cross the right edge starts the next line instead of being
    cut there by the terminal. A word is written once it is complete (a space, a line end,
    or :meth:`end_line` follows), and only one wider than the screen is cut. A pipe gets the
    text unwrapped.

    The text is shown as :func:`for_terminal` shows it, piece by piece (an escape sequence
    cut across two pieces is inert in each); a carriage return that ends a piece waits for
    the next one, so that a Windows line end cut in two is still one line end.
    """

    def __init__(
        self,
        out: TextIO | None = None,
        *,
        wrap: bool = False,
        width: Callable[[], int | None] | None = None,
    ) -> None:
        self._out = out
        self.open = False
        self.wrap = wrap
        self._width = width
        self._column = 0
        self._word = ""  # the word being streamed, not written yet
        self._return = ""  # a carriage return that ended the last piece

    @property
    def out(self) -> TextIO:
        return self._out or sys.stdout

    def text(self, chunk: str) -> None:
        chunk, self._return = self._return + chunk, ""
        if chunk.endswith("\r"):
            chunk, self._return = chunk[:-1], "\r"
        self._show(for_terminal(chunk))

    def _show(self, chunk: str) -> None:
        if not chunk:
            return
        width = self._columns()
        if width is None:
            self.out.write(self._word + chunk)
            self._word = ""
            self.open = not chunk.endswith("\n")
        else:
            self.out.write(self._wrapped(chunk, width))
            self.open = self._column > 0 or bool(self._word)
        self.out.flush()

    def end_line(self) -> None:
        """Finish the partial line, if there is one."""
        if self._return:  # the text ended with it: shown
            self._show(for_terminal(self._return))
            self._return = ""
        if self.open:
            width = self._columns()
            self.out.write(self._place(width or 0) + "\n")
            self.out.flush()
            self.open = False
            self._column = 0

    def _columns(self) -> int | None:
        """The terminal's width when wrapping (``None``: write the text as it comes)."""
        if not self.wrap:
            return None
        if self._width is not None:
            width = self._width()
        else:
            try:
                fd = self.out.fileno()
                width = os.get_terminal_size(fd).columns if os.isatty(fd) else None
            except (OSError, ValueError, AttributeError):
                width = None
        return width if width is not None and width >= 8 else None

    def _wrapped(self, chunk: str, width: int) -> str:
        parts: list[str] = []
        for ch in chunk:
            if ch == "\n":
                parts.append(self._place(width) + "\n")
                self._column = 0
            elif ch in " \t":
                parts.append(self._place(width))
                step = 1 if ch == " " else 8 - self._column % 8  # (tab stops every 8)
                if self._column + step > width:
                    parts.append("\n")  # the space falls at the edge: a new line instead
                    self._column = 0
                else:
                    parts.append(ch)
                    self._column += step
            else:
                self._word += ch
                if cell_len(self._word) >= width:  # wider than the screen: cut it here
                    parts.append(self._place(width))
        return "".join(parts)

    def _place(self, width: int) -> str:
        """The held word, after a line break if it would cross the edge."""
        word, self._word = self._word, ""
        if not word:
            return ""
        size = cell_len(word)
        lead = ""
        if width and self._column > 0 and self._column + size > width:
            lead, self._column = "\n", 0
        self._column += size
        return lead + word


class Deferred:
    """Output held back while the user edits a line at the prompt (printed from another
    thread then, it would run into that line), and let out, in order, when the line is read."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: list[Callable[[], None]] | None = None

    def run(self, show: Callable[[], None]) -> None:
        """``show()`` now, or once the line is read."""
        with self._lock:
            if self._held is not None:
                self._held.append(show)
                return
        show()

    @contextlib.contextmanager
    def holding(self) -> Iterator[None]:
        with self._lock:
            self._held = []
        try:
            yield
        finally:
            with self._lock:
                held, self._held = self._held or [], None
            for show in held:
                show()


@contextlib.contextmanager
def quiet_input(stream: TextIO | None = None) -> Iterator[None]:
    """While the block runs, what is typed on the terminal is not echoed (it would run into
    the spinner's line) but kept: it stays in the terminal's input, and the next prompt reads
    it as if it were typed there. Ctrl-C still interrupts. Not a terminal: nothing changes."""
    with local_modes(stream or sys.stdin, off=("ECHO",)):  # canonical input, signals stay
        yield


@contextlib.contextmanager
def local_modes(
    terminal: TextIO | int, *, on: tuple[str, ...] = (), off: tuple[str, ...] = ()
) -> Iterator[None]:
    """Turn the terminal's local modes named ``on`` on and ``off`` off (termios names:
    ``"ECHO"``, ``"ICANON"``) while the block runs, then put them back as they were. Not a
    terminal, or no termios: nothing changes."""
    saved = _terminal_settings(terminal)
    if saved is None:
        yield
        return
    import termios

    fd, settings = saved
    changed = list(settings)
    for name in on:
        changed[3] |= getattr(termios, name)
    for name in off:
        changed[3] &= ~getattr(termios, name)
    termios.tcsetattr(fd, termios.TCSANOW, changed)
    try:
        yield
    finally:
        with contextlib.suppress(termios.error, OSError):
            termios.tcsetattr(fd, termios.TCSANOW, settings)


def _terminal_settings(terminal: TextIO | int) -> tuple[int, list[Any]] | None:
    """The file descriptor and termios settings of ``terminal``, if it is one."""
    try:
        import termios

        fd = terminal if isinstance(terminal, int) else terminal.fileno()
        return (fd, termios.tcgetattr(fd)) if os.isatty(fd) else None
    except Exception:  # no termios, no file descriptor, termios.error: leave it alone
        return None


class _ConsoleHandler(logging.Handler):
    def __init__(self, err: Console, before: Callable[[], None], deferred: Deferred | None) -> None:
        super().__init__(logging.WARNING)
        self._err, self._before, self._deferred = err, before, deferred

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)
            colour = "red" if record.levelno >= logging.ERROR else "yellow"

            def show() -> None:
                self._before()
                self._err.print(f"[{colour}]{escape(text)}[/]")

            if self._deferred is not None:
                self._deferred.run(show)
            else:
                show()
        except Exception:
            self.handleError(record)


def route_logs(
    err: Console, before: Callable[[], None] = lambda: None, *, deferred: Deferred | None = None
) -> None:
    """Print Retinue's warnings on ``err``, escaped, after ``before`` (e.g. ending a line),
    instead of Python's bare last-resort handler (which this handler becomes for other
    libraries' warnings); held back while ``deferred`` holds."""
    logger = logging.getLogger("retinue")
    for handler in [h for h in logger.handlers if isinstance(h, _ConsoleHandler)]:
        logger.removeHandler(handler)
    handler = _ConsoleHandler(err, before, deferred)
    logger.addHandler(handler)
    logger.propagate = False
    logging.lastResort = handler  # other libraries' warnings too, where nothing handles them


def safe_tracebacks() -> None:
    """Python's report of an uncaught exception (its message may quote a model, a tool or a
    file) printed as :func:`for_terminal` shows it."""

    def report(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        echo("".join(traceback.format_exception(kind, exc, tb)).rstrip("\n"), err=True)

    sys.excepthook = report
