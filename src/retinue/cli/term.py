"""Terminal plumbing shared by the commands: consoles that never interpret what users, models
or files wrote, a line discipline between streamed text and progress lines, and log records
routed through it.

Rich applies markup (``[bold]``) and emoji codes (``:b:``) to what it prints: every text that
comes from outside goes through :func:`escape` and every console is made by :func:`console`
(emoji codes off), so ``archivist:b:`` stays ``archivist:b:``.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import TextIO

from rich.console import Console
from rich.markup import escape

__all__ = ["LineDiscipline", "console", "escape", "route_logs"]


def console(*, stderr: bool = False, file: TextIO | None = None) -> Console:
    """A console for this program: soft wrapping, no emoji codes, no highlighting guesses."""
    return Console(stderr=stderr, file=file, soft_wrap=True, emoji=False, highlight=False)


class LineDiscipline:
    """Tracks whether stdout holds a partial line (streamed text not yet ended), so that a
    progress or log line always starts on a line of its own."""

    def __init__(self, out: TextIO | None = None) -> None:
        self._out = out
        self.open = False

    @property
    def out(self) -> TextIO:
        return self._out or sys.stdout

    def text(self, chunk: str) -> None:
        if not chunk:
            return
        self.out.write(chunk)
        self.out.flush()
        self.open = not chunk.endswith("\n")

    def end_line(self) -> None:
        """Finish the partial line, if there is one."""
        if self.open:
            self.out.write("\n")
            self.out.flush()
            self.open = False


class _ConsoleHandler(logging.Handler):
    def __init__(self, err: Console, before: Callable[[], None]) -> None:
        super().__init__(logging.WARNING)
        self._err, self._before = err, before

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)
            self._before()
            colour = "red" if record.levelno >= logging.ERROR else "yellow"
            self._err.print(f"[{colour}]{escape(text)}[/]")
        except Exception:
            self.handleError(record)


def route_logs(err: Console, before: Callable[[], None] = lambda: None) -> None:
    """Print Retinue's warnings on ``err``, escaped, after ``before`` (e.g. ending a line),
    instead of Python's bare last-resort handler."""
    logger = logging.getLogger("retinue")
    for handler in [h for h in logger.handlers if isinstance(h, _ConsoleHandler)]:
        logger.removeHandler(handler)
    logger.addHandler(_ConsoleHandler(err, before))
    logger.propagate = False
