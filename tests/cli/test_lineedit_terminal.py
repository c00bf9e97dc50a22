"""The chat prompt in a real terminal (tmux): Tab completes a slash command, Ctrl-C at the
prompt tells how to leave, ``\\`` and ``\"\"\"`` still make one message of several lines (and
Alt-Enter adds a line anywhere), and ↑ recalls the last message after the chat restarts."""

from __future__ import annotations

import shlex
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from test_terminal import Pane, pane_for  # noqa: F401 -- the fixture, shared

from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.testing import ScriptedModel

pytestmark = [
    pytest.mark.timeout(300),  # a hang bound: the chat starts slowly on a loaded machine
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux"),
]


def last_row(pane: Pane) -> str:
    rows = [row.rstrip() for row in pane.rows() if row.strip()]
    return rows[-1] if rows else ""


def test_tab_completes_a_command_and_ctrl_c_at_the_prompt_says_how_to_leave(
    tmp_path: Path,
    pane_for: Callable[..., Pane],  # noqa: F811 -- the fixture imported above
) -> None:
    with LoopbackOpenAIServer(ScriptedModel()) as server:  # (not asked)
        pane = pane_for(server)
        pane.wait_for(lambda t: "›" in t)
        pane.keys("/he")
        pane.wait_for(lambda t: "› /he" in t)
        pane.keys("Tab")
        pane.wait_for(lambda t: "› /help" in t)
        pane.keys("Enter")
        screen = pane.wait_for(lambda t: "Alt-Enter starts a new line anywhere." in t)
        assert "/sessions    list live interactive sub-agent sessions" in screen
        assert "unknown command" not in screen

        pane.keys("half a thought")
        pane.wait_for(lambda t: "› half a thought" in t)
        pane.keys("C-c")
        pane.wait_for(lambda t: "(/exit or Ctrl-D to leave)" in t)
        pane.wait_for(lambda t: last_row(pane) == "›")  # the chat goes on, on a fresh line
        pane.keys("C-d")
        screen = pane.wait_for(lambda t: "EXITED" in t)
    assert "EXITED 0" in screen
    assert "^[[" not in screen


def test_a_continued_line_and_a_block_each_make_one_message(
    tmp_path: Path,
    pane_for: Callable[..., Pane],  # noqa: F811 -- the fixture imported above
) -> None:
    model = ScriptedModel(["one", "two", "three"])
    with LoopbackOpenAIServer(model) as server:
        pane = pane_for(server)
        pane.wait_for(lambda t: "›" in t)
        pane.keys("first line \\", "Enter")
        pane.wait_for(lambda t: t.rstrip().endswith("› first line \\\n…"))
        pane.keys("second line", "Enter")
        pane.wait_for(lambda t: "one" in t.splitlines())

        for line in ('"""', "block a", "", "block b \\", '"""'):
            pane.keys(line, "Enter")
        pane.wait_for(lambda t: "two" in t.splitlines())
        screen = pane.text()
        assert "… block a" in screen and "… block b \\" in screen

        pane.keys("hello", "M-Enter", "world", "Enter")  # Alt-Enter: a new line of it
        pane.wait_for(lambda t: "three" in t.splitlines())
        pane.keys("C-d")
        pane.wait_for(lambda t: "EXITED 0" in t)
    users = [m.content for m in model.calls[2].messages if m.role == "user"]
    assert users == ["first line \nsecond line", "block a\n\nblock b \\", "hello\nworld"]


def test_up_recalls_the_last_message_after_the_chat_restarts(
    tmp_path: Path,
    pane_for: Callable[..., Pane],  # noqa: F811 -- the fixture imported above
) -> None:
    model = ScriptedModel(["Noted.", "Noted again."])
    again = f"{shlex.quote(sys.executable)} -m retinue chat"  # the same data directory
    with LoopbackOpenAIServer(model) as server:
        pane = pane_for(server, f"chat; {again}")
        pane.wait_for(lambda t: "›" in t)
        pane.keys('"""', "Enter", "two lines", "Enter", "of it", "Enter", '"""', "Enter")
        pane.wait_for(lambda t: "Noted." in t)
        pane.keys("C-d")
        pane.wait_for(lambda t: t.count("retinue chat · model") == 2 and last_row(pane) == "›")

        pane.keys("Up")  # the whole message, as it was typed
        pane.wait_for(lambda t: t.rstrip().endswith('› """\n… two lines\n… of it\n… """'))
        pane.keys("Enter")
        pane.wait_for(lambda t: "Noted again." in t)
        pane.keys("C-d")
        pane.wait_for(lambda t: "EXITED 0" in t)
    users = [m.content for m in model.calls[1].messages if m.role == "user"]
    assert users == ["two lines\nof it"]
    assert (tmp_path / "home" / "chat_history").stat().st_mode & 0o777 == 0o600
