"""Issue 38, section 7: escape sequences that a model, a sub-agent's question or a hook writes
reach the terminal inert. Black-box: ``retinue run`` on a real pseudo-terminal (the raw bytes
it writes there are read back) and ``retinue chat`` in tmux (the window title a terminal would
set, the screen a terminal would clear), against a scripted model on loopback.

The attack text sets the window title (OSC 0) and clears the screen (CSI 2J); shown, it is
``␛]0;pwned␇`` and ``␛[2J``, plain text."""

from __future__ import annotations

import fcntl
import json
import os
import select
import shlex
import shutil
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.testing import ScriptedModel, call_tool

pytestmark = pytest.mark.timeout(300)  # a hang bound: the chat starts slowly under load

TITLE = "\x1b]0;pwned\x07"
CLEAR = "\x1b[2J"
ATTACK = f"{TITLE}{CLEAR}"
SHOWN = "␛]0;pwned␇␛[2J"
ASKER = "---\nname: asker\ndescription: asks its parent\n---\nAsk before you act.\n"


def environment(tmp_path: Path, server: LoopbackOpenAIServer) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RETINUE_"))}
    env |= {
        "RETINUE_HOME": str(tmp_path / "home"),
        "RETINUE_BLOCK_REAL_MODELS": "1",
        "OPENAI_BASE_URL": server.base_url,
        "OPENAI_API_KEY": "test-key",
        "TERM": "xterm-256color",
    }
    return env


def on_a_terminal(args: list[str], env: dict[str, str], cwd: Path) -> tuple[int, bytes]:
    """Run ``retinue ARGS`` with stdout and stderr on a new pseudo-terminal (stdin: nothing);
    its exit code and every byte it wrote to the terminal."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 160, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "retinue", *args],
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
        env=env,
        cwd=cwd,
        start_new_session=True,
    )
    os.close(slave)
    written = bytearray()
    try:
        while True:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the last writer closed the terminal
                break
            if not data:
                break
            written += data
    finally:
        os.close(master)
    return proc.wait(timeout=30), bytes(written)


def assert_inert(written: bytes) -> None:
    """None of the attack's sequences (nor a lone BEL or 8-bit CSI) reached the terminal."""
    for raw in (b"\x1b]0;", b"\x1b[2J", b"\x07", b"\xc2\x9b", b"\x1b]"):
        assert raw not in written, f"{raw!r} reached the terminal"


def test_a_models_reply_and_questions_reach_the_terminal_inert(tmp_path: Path) -> None:
    agents = tmp_path / ".retinue" / "agents"
    agents.mkdir(parents=True)
    (agents / "asker.md").write_text(ASKER)
    session = {"role": "asker", "interactive": True}
    model = ScriptedModel(
        [
            call_tool("SubAgent", {"task": "check the port", **session}),
            call_tool("AskParent", {"question": f"sub-agent asks {ATTACK}which port?"}),
            call_tool("AskParent", {"question": f"main asks {ATTACK}which port?"}),
            f"Done.{ATTACK} The \u202eport\u202c is 8080.\x9b2J",
        ]
    )
    with LoopbackOpenAIServer(model, chunk_size=3) as server:  # (sequences cut in pieces)
        code, written = on_a_terminal(
            ["run", "-m", "openai:test", "set up the server"], environment(tmp_path, server),
            tmp_path,
        )  # fmt: skip
    shown = written.decode("utf-8", errors="replace")
    assert code == 0, shown
    assert_inert(written)
    assert f"sub-agent asks {SHOWN}which port?" in shown  # the session's question in the tree
    assert f"? main asks {SHOWN}which port?" in shown  # the question to the user
    assert f"Done.{SHOWN} The <U+202E>port<U+202C> is 8080.<U+009B>2J" in shown  # the answer
    assert b"\x1b[" in written  # (a terminal: Rich's own styles are there)


def test_the_answer_on_a_pipe_carries_no_escape_either(tmp_path: Path) -> None:
    model = ScriptedModel(
        [call_tool("AskParent", {"question": f"Port? {ATTACK}"}), f"{ATTACK}8080"]
    )
    with LoopbackOpenAIServer(model) as server:
        proc = subprocess.run(
            [sys.executable, "-m", "retinue", "run", "-m", "openai:test", "go"],
            env=environment(tmp_path, server),
            cwd=tmp_path,
            capture_output=True,
            timeout=60,
        )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.decode() == f"{SHOWN}8080\n"
    assert b"\x1b" not in proc.stdout + proc.stderr and b"\x07" not in proc.stderr
    assert f"? Port? {SHOWN}" in proc.stderr.decode()


HOOK = f"""import json, sys
event = json.load(sys.stdin)["hook_event_name"]
if event == "UserPromptSubmit":
    print(json.dumps({{"systemMessage": "hook says " + {ATTACK!r} + "hi"}}))
elif event == "SessionStart":
    sys.stderr.write("start says " + {ATTACK!r})
    sys.exit(2)
elif event == "Stop":
    sys.stderr.write("stop failed " + {ATTACK!r})
    sys.exit(1)
"""


def test_a_hooks_messages_and_errors_reach_the_terminal_inert(tmp_path: Path) -> None:
    script = tmp_path / "hook.py"
    script.write_text(HOOK)
    command = json.dumps(f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}")
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        "".join(
            f'[[hooks.{event}]]\nhooks = [{{ type = "command", command = {command} }}]\n'
            for event in ("UserPromptSubmit", "SessionStart", "Stop")
        )
    )
    with LoopbackOpenAIServer(ScriptedModel(["All good."])) as server:
        code, written = on_a_terminal(
            ["run", "-m", "openai:test", "hello"], environment(tmp_path, server), tmp_path
        )
    shown = written.decode("utf-8", errors="replace")
    assert code == 0, shown
    assert_inert(written)
    assert f"hook says {SHOWN}hi" in shown  # systemMessage
    assert f"start says {SHOWN}" in shown  # exit 2 of an event that cannot block: stderr
    assert f"stop failed {SHOWN}" in shown  # a failing hook's stderr, as a warning
    assert "All good." in shown


class Pane:
    """One tmux window on a private server."""

    def __init__(self, socket: Path, command: str) -> None:
        self.socket = socket
        self.tmux("new-session", "-d", "-x", "160", "-y", "50", command)

    def tmux(self, *args: str) -> str:
        return subprocess.run(
            ["tmux", "-S", str(self.socket), *args], capture_output=True, text=True, check=True
        ).stdout

    def text(self) -> str:
        return self.tmux("capture-pane", "-p", "-J", "-S", "-200", "-t", "0")

    def wait_for(self, found: str) -> str:
        for _ in range(600):  # a minute and more: a hang bound, polled
            if found in (text := self.text()):
                return text
            time.sleep(0.1)
        raise AssertionError(f"the terminal never showed {found!r}:\n{self.text()}")


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_chat_in_a_real_terminal_keeps_its_title_and_its_screen(tmp_path: Path) -> None:
    model = ScriptedModel(
        [f"streamed {ATTACK}answer", call_tool("AskParent", {"question": f"asked {ATTACK}?"})]
    )
    with LoopbackOpenAIServer(model, chunk_size=2) as server:  # ESC, ]0 and ;p… apart
        env = environment(tmp_path, server) | {"HOME": str(tmp_path)}
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        chat = f"{shlex.quote(sys.executable)} -m retinue chat -m openai:test"
        script = f"{chat}; echo EXITED $?; sleep 30"  # (the window stays to be read)
        pane = Pane(tmp_path / "tmux.sock", f"env -i {exports} sh -c {shlex.quote(script)}")
        try:
            title = pane.tmux("display-message", "-p", "-t", "0", "#{pane_title}")
            pane.wait_for("›")
            pane.tmux("send-keys", "-t", "0", "first", "Enter")
            screen = pane.wait_for("answer")
            after = pane.tmux("display-message", "-p", "-t", "0", "#{pane_title}")
            assert after == title and "pwned" not in after  # OSC 0 never reached it
            assert "retinue chat · model" in screen  # not cleared: the banner is still there
            assert f"streamed {SHOWN}answer" in screen
            pane.tmux("send-keys", "-t", "0", "second", "Enter")
            pane.wait_for(f"asked {SHOWN}?")
            pane.tmux("send-keys", "-t", "0", "C-d")
            screen = pane.wait_for("EXITED")
        finally:
            subprocess.run(["tmux", "-S", str(pane.socket), "kill-server"], capture_output=True)
    assert "EXITED 0" in screen


def test_what_files_define_is_listed_inert(tmp_path: Path) -> None:
    """``retinue roles``, ``retinue skills`` and ``retinue mcp list``: a role's and a skill's
    description, a role file's error, an MCP server's command, each from a workspace file.
    (The role and skill readers already show control characters; this guards the listings.)"""
    agents = tmp_path / ".retinue" / "agents"
    agents.mkdir(parents=True)
    evil = '"\\e]0;pwned\\a\\e[2Jhelps"'  # YAML: ESC, BEL
    (agents / "helper.md").write_text(f"---\nname: helper\ndescription: {evil}\n---\nHi\n")
    (agents / "broken.md").write_text(f"---\nname: broken\ndescription: {evil}\n  bad: [\n---\n")
    skill = tmp_path / ".claude" / "skills" / "pdf"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(f"---\nname: pdf\ndescription: {evil}\n---\nUse it.\n")
    server = {"mcpServers": {"evil": {"command": "true", "args": [ATTACK]}}}
    (tmp_path / ".mcp.json").write_text(json.dumps(server))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RETINUE_"))}
    env |= {"RETINUE_HOME": str(tmp_path / "home"), "HOME": str(tmp_path)}
    for args in (["roles"], ["skills"], ["mcp", "list", "--no-start"]):
        proc = subprocess.run(
            [sys.executable, "-m", "retinue", *args], env=env, cwd=tmp_path,
            capture_output=True, timeout=60,
        )  # fmt: skip
        written = proc.stdout + proc.stderr
        assert proc.returncode == 0, written
        assert b"\x1b" not in written and b"\x07" not in written, (args, written)
        shown = written.decode()
        assert "]0;pwned" in shown, (args, shown)  # (shown: ␛]0;pwned␇, or \x1b]0;pwned\x07)
