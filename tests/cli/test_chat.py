"""``retinue chat`` as a user drives it: lines on stdin, Ctrl-C as a real SIGINT."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.testing import ScriptedModel, call_tool

pytestmark = pytest.mark.timeout(300)  # a hang bound: a chat starts slowly under load


def start_chat(server: LoopbackOpenAIServer, tmp_path: Path, *args: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RETINUE_"))}
    env.update(
        RETINUE_HOME=str(tmp_path / "home"),
        RETINUE_BLOCK_REAL_MODELS="1",
        OPENAI_BASE_URL=server.base_url,
        OPENAI_API_KEY="test-key",
        RETINUE_MODEL="openai:test",
    )
    return subprocess.Popen(
        [sys.executable, "-m", "retinue", "chat", *args],
        env=env,
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_chat_keeps_the_conversation_across_turns(tmp_path: Path) -> None:
    model = ScriptedModel(["Hello, Ada.", "Your name is Ada."])
    with LoopbackOpenAIServer(model) as server:
        chat = start_chat(server, tmp_path)
        out, err = chat.communicate("I am Ada\n/help\nwhat is my name?\n/exit\n", timeout=40)
    assert chat.returncode == 0, err
    assert "Hello, Ada." in out and "Your name is Ada." in out
    second = model.calls[1].messages
    assert [m.content for m in second if m.role == "user"] == ["I am Ada", "what is my name?"]
    assert "/sessions" in err  # the help text


def test_keep_sessions_holds_a_session_across_messages_until_exit(tmp_path: Path) -> None:
    ask = {"role": "researcher", "interactive": True}
    memorize = call_tool("memorize", {"block_updates": [], "new_passages": []})
    model = ScriptedModel(
        [
            call_tool("SubAgent", {"task": "look at a", **ask}),
            "a looks fine",
            "asked.",
            call_tool("SubAgent", {"task": "and b?", **ask}),
            "b too",
            "asked again.",
            memorize,
        ]
    )
    with LoopbackOpenAIServer(model) as server:
        chat = start_chat(server, tmp_path, "--keep-sessions")
        out, err = chat.communicate("check a\n/sessions\ncheck b\n/exit\n", timeout=40)
    assert chat.returncode == 0, err
    assert "main/researcher" in err and "idle" in err  # the /sessions table
    assert "asked." in out and "asked again." in out
    researcher_second_turn = model.calls[4].messages
    assert [m.content for m in researcher_second_turn if m.role == "user"] == [
        "look at a",
        "and b?",
    ]
    assert "session main/researcher unloaded" in err
    model.assert_done()


def test_ctrl_c_cancels_the_turn_and_the_chat_goes_on(tmp_path: Path) -> None:
    slow = call_tool("Bash", {"command": "touch started; sleep 300"})  # until Ctrl-C
    model = ScriptedModel([slow, "still here"])
    with LoopbackOpenAIServer(model) as server:
        # the command runs whether or not bubblewrap is here to sandbox it (no one to ask)
        chat = start_chat(server, tmp_path, "--permission-mode", "bypassPermissions")
        assert chat.stdin is not None
        chat.stdin.write("run something slow\n")
        chat.stdin.flush()
        deadline = time.monotonic() + 120  # a hang bound: the chat starts slowly under load
        while not (tmp_path / "started").exists() and time.monotonic() < deadline:
            time.sleep(0.05)  # until the Bash tool is running
        assert (tmp_path / "started").exists()
        chat.send_signal(signal.SIGINT)
        out, err = chat.communicate("are you there?\n/exit\n", timeout=120)
    assert chat.returncode == 0, err
    assert "turn cancelled" in err
    assert "still here" in out
    last = model.calls[-1].messages
    # the cancelled tool call got a result, so the history stayed valid for the next turn
    assert any(m.role == "tool" and "cancelled" in m.content for m in last)


def test_chat_reads_multi_line_messages_and_leaves_on_a_fresh_line(tmp_path: Path) -> None:
    model = ScriptedModel(["one", "two", ""])
    typed = 'first line \\\nsecond line\n"""\nblock a\n\nblock b\n"""\nanything\n'
    with LoopbackOpenAIServer(model) as server:
        chat = start_chat(server, tmp_path)
        out, err = chat.communicate(typed, timeout=40)
    assert chat.returncode == 0, err
    users = [m.content for m in model.calls[2].messages if m.role == "user"]
    assert users == ["first line \nsecond line", "block a\n\nblock b", "anything"]
    assert "(The model ended its turn without an answer.)" in out
    assert out.endswith("\n")


def test_the_first_screen_suggests_what_the_embedded_model_does_reliably() -> None:
    from retinue.cli.chat import FIRST_TRIES, first_tries

    line = first_tries("local:qwen2.5-coder-1.5b")
    assert line is not None and all(t in line for t in FIRST_TRIES)
    assert "Glob" in line  # the listing that works names its tool (issue 41)
    assert first_tries("openai:gpt-4o-mini") is None  # a hosted model needs no hints
