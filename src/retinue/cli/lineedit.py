"""The chat prompt's line editor. When stdin and stdout are a terminal it is prompt_toolkit's
``PromptSession``: one message is edited as a whole, over as many lines as it takes (the
arrow keys move between them, Ctrl-R searches); Enter sends it once it is whole, and
Alt-Enter (Esc, Enter) starts a new line of it anywhere; Tab completes the chat's slash
commands (typing ``/`` lists them); ↑/↓ past the first or last line recall earlier messages,
kept in a file of the data directory (the newest :data:`HISTORY_LENGTH`, readable by its
owner alone; a history that cannot be read or written is left out, the chat goes on).

A message is whole unless its last line ends in ``\\`` (Enter goes on to the next line, and
the ``\\`` is dropped from the message) or its first line holds only ``\"\"\"`` and no line
after it does yet (a block: the lines between the two are the message). Piped input (no
terminal) is read as plain lines with the same rules, without prompt_toolkit.

Nothing but this module's own prompts and the user's typing reaches prompt_toolkit's screen:
no model text, and no formatted-text markup at all.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.enums import DEFAULT_BUFFER
from prompt_toolkit.filters import has_focus
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

from retinue.cli.term import echo, edit_line, for_terminal, read_line

if TYPE_CHECKING:
    from prompt_toolkit.input import Input
    from prompt_toolkit.output import Output

__all__ = ["HISTORY_FILE", "CommandCompleter", "LineReader", "is_whole", "message"]

HISTORY_FILE = "chat_history"
HISTORY_LENGTH = 1000
BLOCK = '"""'


def is_whole(text: str) -> bool:
    """Whether ``text``, as typed so far, is a whole message (see the module text)."""
    lines = text.split("\n")
    if lines[0].strip() == BLOCK:
        return len(lines) > 1 and lines[-1].strip() == BLOCK
    return not lines[-1].endswith("\\")


def message(text: str) -> str:
    """The message ``text`` makes: a block's lines without its quote lines, or the lines with
    the ``\\`` that continued each one dropped."""
    lines = text.split("\n")
    if lines[0].strip() != BLOCK:
        return "\n".join(line.removesuffix("\\") for line in lines)
    body = lines[1:]
    if body and body[-1].strip() == BLOCK:
        body.pop()
    return "\n".join(body)


class LineReader:
    """``read()`` returns one message (``None`` at the end of input, e.g. Ctrl-D on an empty
    prompt); Ctrl-C raises ``KeyboardInterrupt``. Either way the cursor is left at the start
    of a line.

    ``commands`` maps each slash command, as its help writes it (``/attach FILE``), to what
    it does: Tab completes them. ``input`` and ``output`` (prompt_toolkit's) put the editor on
    them instead of the terminal (tests use a pipe).
    """

    def __init__(
        self,
        history: Path | None,
        *,
        commands: Mapping[str, str] | None = None,
        prompt: str = "› ",
        more: str = "… ",
        input: Input | None = None,
        output: Output | None = None,
    ) -> None:
        self.prompt, self.more = prompt, more
        self._session: PromptSession[str] | None = None
        if input is not None or (sys.stdin.isatty() and sys.stdout.isatty()):
            self._session = _session(history, commands or {}, more, input, output)

    def read(self) -> str | None:
        if self._session is None:
            return self._read_lines()
        try:
            return message(edit_line(self._session, self.prompt))
        except EOFError:
            return None

    def _read_lines(self) -> str | None:
        try:
            text = read_line(self.prompt)
            while not is_whole(text):
                try:
                    text += "\n" + read_line(self.more)
                except EOFError:  # the end of input ends the message too
                    break
        except EOFError:
            echo("")
            return None
        except KeyboardInterrupt:
            echo("")
            raise
        return message(text)


def _session(
    history: Path | None,
    commands: Mapping[str, str],
    more: str,
    input: Input | None,
    output: Output | None,
) -> PromptSession[str]:
    def continuation(width: int, line_number: int, wrap_count: int) -> str:
        return " " * width if wrap_count else for_terminal(more)

    return PromptSession(
        history=_History(history) if history is not None else InMemoryHistory(),
        completer=CommandCompleter(commands),
        complete_while_typing=True,
        reserve_space_for_menu=min(len(commands), 8),
        key_bindings=_keys(),
        multiline=True,  # (Enter is bound below: it sends a whole message)
        enable_suspend=True,  # Ctrl-Z, as in a shell
        prompt_continuation=continuation,
        input=input,
        output=output,
    )


def _keys() -> KeyBindings:
    keys = KeyBindings()
    editing = has_focus(DEFAULT_BUFFER)  # (not while Ctrl-R searches)

    @keys.add("enter", filter=editing)
    def _enter(event: KeyPressEvent) -> None:
        buffer = event.current_buffer  # (a completion chosen in the menu is in its text)
        if is_whole(buffer.text):
            buffer.validate_and_handle()
        else:
            buffer.insert_text("\n")

    @keys.add("escape", "enter", filter=editing)
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    return keys


class CommandCompleter(Completer):
    """Completes a slash command at the start of a message (its name, and a space after it
    where it takes an argument), with what it does beside it in the menu."""

    def __init__(self, commands: Mapping[str, str]) -> None:
        self._commands = commands

    def get_completions(
        self, document: Document, complete_event: CompleteEvent
    ) -> Iterator[Completion]:
        typed = document.text_before_cursor
        if not typed.startswith("/") or any(ch.isspace() for ch in typed):
            return
        for usage, what in self._commands.items():
            name, _, argument = usage.partition(" ")
            if name.startswith(typed):
                text = f"{name} " if argument else name
                yield Completion(text, -len(typed), display=usage, display_meta=what)


class _History(FileHistory):
    """prompt_toolkit's file history, kept to the newest :data:`HISTORY_LENGTH` entries (the
    file is rewritten once it holds twice as many), written for its owner alone, and never
    in the chat's way: an unreadable file is an empty history, an unwritable one is not
    written. A file GNU readline wrote (before prompt_toolkit) is read, and rewritten in
    prompt_toolkit's form."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.path = path

    def load_history_strings(self) -> Iterable[str]:
        try:
            newest_first = list(super().load_history_strings())
            if not newest_first and self.path.is_file():  # GNU readline's: a line an entry
                lines = self.path.read_text(encoding="utf-8", errors="replace").splitlines()
                if newest_first := [line for line in reversed(lines) if line.strip()]:
                    self._rewrite(newest_first[:HISTORY_LENGTH])
        except OSError:
            return []
        if len(newest_first) > 2 * HISTORY_LENGTH:
            self._rewrite(newest_first[:HISTORY_LENGTH])
        return newest_first[:HISTORY_LENGTH]

    def store_string(self, string: str) -> None:
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600))
            os.chmod(self.path, 0o600)  # what you typed is yours alone
            super().store_string(string)

    def _rewrite(self, newest_first: list[str]) -> None:
        name = ""
        try:
            fd, name = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.")
            os.close(fd)  # (made for its owner alone)
            kept: History = FileHistory(name)
            for string in reversed(newest_first):
                kept.store_string(string)
            os.replace(name, self.path)
        except OSError:
            if name:
                with contextlib.suppress(OSError):
                    os.unlink(name)
