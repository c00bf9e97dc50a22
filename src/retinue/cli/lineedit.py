"""The chat prompt's line editor: GNU readline when stdin is a terminal (arrow keys move and
recall, Ctrl-R searches), with the history kept in a file of the data directory, and
multi-line input: a line ending in ``\\`` continues on the next one, and a line holding only
``\"\"\"`` opens a block that the next such line closes. Piped input is read as plain lines.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from types import ModuleType

from retinue.cli.term import read_line

__all__ = ["HISTORY_FILE", "LineReader"]

HISTORY_FILE = "chat_history"
HISTORY_LENGTH = 1000
BLOCK = '"""'


class LineReader:
    """``read()`` returns one message (``None`` at end of input, e.g. Ctrl-D)."""

    def __init__(self, history: Path | None, *, prompt: str = "› ", more: str = "… ") -> None:
        self.prompt, self.more = prompt, more
        self.history = history
        self._readline = _load_readline() if sys.stdin.isatty() else None
        if self._readline is not None and history is not None and history.is_file():
            with contextlib.suppress(OSError):  # an unreadable history does not stop the chat
                self._readline.read_history_file(history)

    def read(self) -> str | None:
        try:
            first = read_line(self.prompt)
        except EOFError:
            return None
        if first.strip() == BLOCK:
            lines = self._block()
        else:
            lines = [first]
            while lines[-1].endswith("\\"):
                lines[-1] = lines[-1][:-1]
                if (line := self._more()) is None:
                    break
                lines.append(line)
        self._save()
        return "\n".join(lines)

    def _block(self) -> list[str]:
        lines: list[str] = []
        while (line := self._more()) is not None and line.strip() != BLOCK:
            lines.append(line)
        return lines

    def _more(self) -> str | None:
        try:
            return read_line(self.more)
        except EOFError:  # the end of input ends the message too
            return None

    def _save(self) -> None:
        if self._readline is None or self.history is None:
            return
        try:
            self.history.parent.mkdir(parents=True, exist_ok=True)
            self._readline.set_history_length(HISTORY_LENGTH)
            self._readline.write_history_file(self.history)
            os.chmod(self.history, 0o600)  # what you typed is yours alone
        except OSError:
            pass


def _load_readline() -> ModuleType | None:
    try:
        import readline
    except ImportError:  # a Python built without it: plain input()
        return None
    return readline
