"""The chat prompt's reader on prompt_toolkit's pipe input: whole messages over several lines
(``\\``, ``\"\"\"``, Alt-Enter), Ctrl-C and Ctrl-D, the history across restarts (its file the
owner's alone, kept short, and never in the way), and the slash commands' completion. The
same prompt in a real terminal: ``test_lineedit_terminal.py``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from prompt_toolkit.input import PipeInput, create_pipe_input
from prompt_toolkit.output import DummyOutput

from retinue.cli.chat import COMMANDS
from retinue.cli.lineedit import HISTORY_LENGTH, CommandCompleter, LineReader, is_whole, message

ENTER, ALT_ENTER, UP, CTRL_C, CTRL_D = "\r", "\x1b\r", "\x1b[A", "\x03", "\x04"


@pytest.fixture
def keys() -> Iterator[PipeInput]:
    with create_pipe_input() as pipe:
        yield pipe


def reader(keys: PipeInput, history: Path | None) -> LineReader:
    return LineReader(history, commands=COMMANDS, input=keys, output=DummyOutput())


@pytest.mark.parametrize(
    ("typed", "whole", "sent"),
    [
        ("hello", True, "hello"),
        ("first \\", False, "first "),
        ("first \\\nsecond", True, "first \nsecond"),
        ('"""', False, ""),
        ('  """ ', False, ""),
        ('"""\na \\\n\nb', False, "a \\\n\nb"),  # (the end of input ends it as it is)
        ('"""\na \\\n\nb\n"""', True, "a \\\n\nb"),
        ('"""\n"""', True, ""),
        ("hello\nworld", True, "hello\nworld"),  # (Alt-Enter's new line)
        ('say """', True, 'say """'),
    ],
)
def test_what_makes_a_whole_message_and_what_it_sends(typed: str, whole: bool, sent: str) -> None:
    assert is_whole(typed) is whole
    assert message(typed) == sent


def test_one_message_over_several_lines(keys: PipeInput, tmp_path: Path) -> None:
    lines = reader(keys, tmp_path / "history")
    keys.send_text(ENTER.join(["first \\", "second", '"""', "a \\", "", "b", '"""', ""]))
    assert lines.read() == "first \nsecond"
    assert lines.read() == "a \\\n\nb"
    keys.send_text(f"hello{ALT_ENTER}world{ENTER}")
    assert lines.read() == "hello\nworld"
    keys.send_text(ENTER)
    assert lines.read() == ""


def test_ctrl_c_interrupts_and_ctrl_d_ends_the_input(keys: PipeInput, tmp_path: Path) -> None:
    lines = reader(keys, tmp_path / "history")
    keys.send_text(f"half a thought{CTRL_C}")
    with pytest.raises(KeyboardInterrupt):
        lines.read()
    keys.send_text(f"x{CTRL_D}")  # (not at an empty prompt: deletes forward)
    keys.send_text(f"{ENTER}")
    assert lines.read() == "x"
    keys.send_text(CTRL_D)
    assert lines.read() is None


def test_the_history_outlives_the_chat_and_is_the_owners_alone(
    keys: PipeInput, tmp_path: Path
) -> None:
    history = tmp_path / "home" / "chat_history"  # (its folder made on the first message)
    keys.send_text(ENTER.join(['"""', "two lines", "of it", '"""', "last one", ""]))
    first = reader(keys, history)
    assert first.read() == "two lines\nof it"
    assert first.read() == "last one"
    assert history.stat().st_mode & 0o777 == 0o600

    again = reader(keys, history)  # a new chat on the same data directory
    keys.send_text(f"{UP}{UP}{ENTER}")  # ↑ past the first line of the last message
    assert again.read() == "two lines\nof it"


def test_a_long_history_is_cut_to_its_newest_entries(keys: PipeInput, tmp_path: Path) -> None:
    history = tmp_path / "chat_history"
    count = 2 * HISTORY_LENGTH + 1
    history.write_text("".join(f"\n# then\n+message {n}\n" for n in range(count)))
    lines = reader(keys, history)
    keys.send_text(f"{UP}{ENTER}")
    assert lines.read() == f"message {count - 1}"
    kept = [ln for ln in history.read_text().splitlines() if ln.startswith("+")]
    assert kept[0] == f"+message {count - HISTORY_LENGTH}" and len(kept) == HISTORY_LENGTH
    assert history.stat().st_mode & 0o777 == 0o600


def test_the_history_readline_wrote_is_kept(keys: PipeInput, tmp_path: Path) -> None:
    history = tmp_path / "chat_history"
    history.write_text("older\nolder + newer\n")  # one message a line
    lines = reader(keys, history)
    keys.send_text(f"{UP}{ENTER}newest{ENTER}")
    assert lines.read() == "older + newer"
    assert lines.read() == "newest"
    again = reader(keys, history)
    keys.send_text(f"{UP}{UP}{UP}{ENTER}")
    assert again.read() == "older"


def test_a_history_that_cannot_be_read_or_written_is_left_out(
    keys: PipeInput, tmp_path: Path
) -> None:
    (tmp_path / "a_file").write_text("")
    for history in (tmp_path / "a_folder", tmp_path / "a_file" / "chat_history"):
        (tmp_path / "a_folder").mkdir(exist_ok=True)  # (a folder where the file would be)
        lines = reader(keys, history)
        keys.send_text(f"still here{ENTER}")
        assert lines.read() == "still here"
    assert os.listdir(tmp_path / "a_folder") == []


def test_the_chats_commands_are_completed_at_the_start_of_a_message() -> None:
    completer = CommandCompleter(COMMANDS)

    def completions(typed: str) -> list[tuple[str, str]]:
        found = completer.get_completions(Document(typed), CompleteEvent())
        return [(c.text, c.display_text) for c in found]

    assert completions("/he") == [("/help", "/help")]
    assert completions("/at") == [("/attach ", "/attach FILE")]  # its argument comes next
    assert [text.strip() for text, _ in completions("/")] == [u.split()[0] for u in COMMANDS]
    assert completions("/help me") == completions("say /he") == completions("hello") == []
