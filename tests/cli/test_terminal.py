"""``retinue chat`` in a real terminal (tmux): line editing with history, the spinner while a
slow model answers, escaped role-file errors, and progress lines that never run into the
streamed answer."""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from test_chat_consolidation import GatedModel  # (tests/cli is on the path)

from heldmodel import HeldModel
from retinue.errors import ModelError
from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.memory import ConsolidationOptions, open_memory
from retinue.messages import AssistantMessage, ToolCall, UserMessage
from retinue.testing import ScriptedModel, call_tool

pytestmark = [
    pytest.mark.timeout(300),  # a hang bound: the chat starts slowly on a loaded machine
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux"),
]

EMOJI_ROLE = "---\nname: archivist:b:\ndescription: x\n---\nbody\n"
MARKUP_ROLE = "---\nname: marked\ndescription: [bold red\n---\nbody\n"


class Pane:
    """One tmux window on a private server, driven by keys and read as text."""

    def __init__(self, socket: Path, command: str, width: int = 160) -> None:
        self.socket = socket
        self._tmux("new-session", "-d", "-x", str(width), "-y", "50", command)

    def _tmux(self, *args: str) -> str:
        return subprocess.run(
            ["tmux", "-S", str(self.socket), *args], capture_output=True, text=True, check=True
        ).stdout

    def keys(self, *keys: str) -> None:
        self._tmux("send-keys", "-t", "0", *keys)

    def text(self) -> str:
        return self._tmux("capture-pane", "-p", "-J", "-S", "-200", "-t", "0")

    def rows(self) -> list[str]:
        """The screen's rows as shown (wrapped lines not joined)."""
        return self._tmux("capture-pane", "-p", "-S", "-200", "-t", "0").splitlines()

    def wait_for(self, found: Callable[[str], bool], timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.text()
            if found(text):
                return text
            time.sleep(0.1)
        raise AssertionError(f"the terminal never showed what was expected:\n{self.text()}")

    def close(self) -> None:
        subprocess.run(["tmux", "-S", str(self.socket), "kill-server"], capture_output=True)


@pytest.fixture
def pane_for(tmp_path: Path) -> Iterator[Callable[[LoopbackOpenAIServer], Pane]]:
    panes: list[Pane] = []
    (tmp_path / ".retinue" / "agents").mkdir(parents=True)
    (tmp_path / ".retinue" / "agents" / "emoji.md").write_text(EMOJI_ROLE)
    (tmp_path / ".retinue" / "agents" / "markup.md").write_text(MARKUP_ROLE)
    (tmp_path / "notes.txt").write_text("forty-two\n")

    def start(
        server: LoopbackOpenAIServer,
        command: str = "chat",
        width: int = 160,
        env_overrides: dict[str, str] | None = None,
    ) -> Pane:
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(tmp_path),
            "TERM": "xterm-256color",
            "RETINUE_HOME": str(tmp_path / "home"),
            "RETINUE_BLOCK_REAL_MODELS": "1",
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": "test-key",
            "RETINUE_MODEL": "openai:test",
        }
        env.update(env_overrides or {})
        if "PYTHONPATH" in os.environ:  # (to run these tests against another checkout)
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        python = shlex.quote(sys.executable)
        script = (
            f"cd {shlex.quote(str(tmp_path))} && {python} -m retinue roles >/dev/null; "
            f"{python} -m retinue {command}; echo EXITED $?; sleep 30"
        )
        command = "env -i " + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        pane = Pane(tmp_path / "tmux.sock", f"{command} sh -c {shlex.quote(script)}", width)
        panes.append(pane)
        return pane

    yield start
    for pane in panes:
        pane.close()


def test_chat_in_a_terminal(tmp_path: Path, pane_for: Callable[..., Pane]) -> None:
    read = ToolCall("call_1", "Read", '{"file_path": "notes.txt"}')
    # its first call waits until the test has seen the spinner (a delay could run out first)
    model = HeldModel([AssistantMessage("Let me look.", (read,)), "The note says forty-two."])
    with LoopbackOpenAIServer(model) as server:
        pane = pane_for(server)
        screen = pane.wait_for(lambda t: "›" in t)

        # the role file's problem, exactly as written: no markup, no emoji (``:b:``)
        assert "'archivist:b:'" in screen and "🅱" not in screen
        assert "description: [bold red ^ expected ',' or ']', but got '<stream end>'" in screen
        assert "2 role file(s) have problems" in screen

        pane.keys("what does the note say?", "Enter")
        thinking = pane.wait_for(lambda t: "thinking…" in t)
        model.release.set()
        assert "main thinking… " in thinking  # the spinner, with the elapsed seconds
        screen = pane.wait_for(lambda t: "The note says forty-two." in t and t.count("›") >= 2)
        lines = [ln.rstrip() for ln in screen.splitlines()]
        assert "Let me look." in lines  # streamed text ends its line before the tool line
        assert any(ln.lstrip().startswith("→ Read(") for ln in lines)
        assert "The note says forty-two." in lines
        assert any(ln.startswith("· ") and "out tokens" in ln for ln in lines)  # token counts
        assert "thinking…" not in screen  # the spinner is gone

        pane.keys("Up")  # history recall with the arrow key
        pane.wait_for(lambda t: t.rstrip().endswith("› what does the note say?"))
        pane.keys("C-u")
        pane.keys("C-d")
        screen = pane.wait_for(lambda t: "EXITED" in t)
    assert "EXITED 0" in screen
    assert "^[[" not in screen
    history = (tmp_path / "home" / "chat_history").read_text()
    assert "what does the note say?" in history


def test_run_shows_a_spinner_on_a_terminal_and_only_the_answer_on_stdout(
    tmp_path: Path, pane_for: Callable[..., Pane]
) -> None:
    model = HeldModel(["All done."])  # until the test has seen the spinner
    with LoopbackOpenAIServer(model) as server:
        pane = pane_for(server, "run 'do it'")
        assert "main thinking… " in pane.wait_for(lambda t: "thinking…" in t)
        model.release.set()
        screen = pane.wait_for(lambda t: "EXITED" in t)
    assert "EXITED 0" in screen and "All done." in screen
    assert "thinking…" not in screen
    assert any(ln.startswith("· ") and "out tokens" in ln for ln in screen.splitlines())


STORY = (
    "Retinue keeps every streamed word whole: a narrow terminal wraps this sentence between "
    "words, never inside one, however the chunks happen to fall across the screen's edge."
)


def test_streamed_text_wraps_between_words(tmp_path: Path, pane_for: Callable[..., Pane]) -> None:
    model = ScriptedModel([STORY])
    with LoopbackOpenAIServer(model, chunk_size=7) as server:  # chunks cut words anywhere
        pane = pane_for(server, width=40)
        pane.wait_for(lambda t: "›" in t)
        pane.keys("tell me", "Enter")
        pane.wait_for(lambda t: "anywhere across" in t.replace("\n", " ") or t.count("›") >= 2)
        rows = pane.rows()
    words = set(STORY.split())
    story_rows = [r.rstrip() for r in rows if r.strip() and set(r.split()) <= words]
    assert len(story_rows) >= 4  # it did wrap
    assert " ".join(story_rows) == STORY  # each row ends at a word's end


def test_text_typed_during_a_turn_is_not_echoed_and_waits_at_the_next_prompt(
    tmp_path: Path, pane_for: Callable[..., Pane]
) -> None:
    wait = "while [ ! -f go ]; do sleep 0.05; done"  # the tool runs until the test says
    model = ScriptedModel([call_tool("Bash", {"command": wait}), "First answer.", "Second answer."])
    with LoopbackOpenAIServer(model) as server:
        pane = pane_for(server, "chat --permission-mode bypassPermissions")  # bwrap or not
        pane.wait_for(lambda t: "›" in t)
        pane.keys("first question", "Enter")
        pane.wait_for(lambda t: "→ Bash(" in t)  # no spinner while the tool runs
        pane.keys("typed ahead")
        deadline = time.monotonic() + 1.5  # an echo shows within this (tmux redraws at once)
        while time.monotonic() < deadline:
            assert "typed ahead" not in pane.text(), "echoed while the turn runs"
            time.sleep(0.1)
        (tmp_path / "go").touch()
        screen = pane.wait_for(lambda t: "› typed ahead" in t)  # the next prompt holds it
        assert "First answer." in [ln.rstrip() for ln in screen.splitlines()]
        pane.keys("Enter")
        pane.wait_for(lambda t: "Second answer." in t)
        pane.keys("C-d")
        pane.wait_for(lambda t: "EXITED" in t)
    users = [m.content for m in model.calls[2].messages if m.role == "user"]
    assert users == ["first question", "typed ahead"]


def test_a_sessions_memory_is_consolidated_while_the_prompt_waits(
    tmp_path: Path, pane_for: Callable[..., Pane]
) -> None:
    gate = threading.Event()
    model = GatedModel(gate)  # its consolidation answers once the gate opens
    with LoopbackOpenAIServer(model) as server:
        pane = pane_for(server)
        pane.wait_for(lambda t: "›" in t)
        pane.keys("check it", "Enter")
        pane.wait_for(lambda t: "in the background…" in t and t.rstrip().endswith("›"))
        assert "consolidating researcher's memory in the background…" in pane.text()
        assert model.memorize_asked.wait(30)  # it goes on while the prompt waits
        pane.keys("and now?", "Enter")
        pane.wait_for(lambda t: "done two." in t)
        pane.keys("/exit", "Enter")
        pane.wait_for(
            lambda t: "consolidating researcher's memory… (Ctrl-C keeps it for later)" in t
        )
        gate.set()
        screen = pane.wait_for(lambda t: "EXITED" in t)
    assert "EXITED 0" in screen
    assert "✓ main/researcher memory consolidated" in screen
    assert "Ctrl-C keeps it for later" not in screen  # the spinner is gone


def test_the_embedded_model_is_assembled_before_the_first_prompt(
    tmp_path: Path, pane_for: Callable[..., Pane]
) -> None:
    """Its progress bar has the terminal to itself: assembled at the first model call, it
    shared a line with the spinner."""
    pytest.importorskip("llama_cpp")
    from retinue.llm._gguf import MODELS

    model = MODELS["qwen2.5-coder-0.5b"]
    with LoopbackOpenAIServer(ScriptedModel()) as server:  # (not asked)
        pane = pane_for(server, env_overrides={"RETINUE_MODEL": "local:qwen2.5-coder-0.5b"})
        screen = pane.wait_for(lambda t: "›" in t, timeout=120)
        rows = [ln.rstrip() for ln in screen.splitlines()]
        bar = [ln for ln in rows if ln.startswith(f"Assembling {model.file_name}")]
        assert len(bar) == 1 and "thinking" not in bar[0]
        assert (tmp_path / "home" / "models" / model.file_name).stat().st_size == model.size
        pane.keys("C-d")
        assert "EXITED 0" in pane.wait_for(lambda t: "EXITED" in t)


def test_memory_retry_shows_each_transcript_with_a_spinner(
    tmp_path: Path, pane_for: Callable[..., Pane]
) -> None:
    store = open_memory(tmp_path / "home", options=ConsolidationOptions(retry_delay=0))
    asyncio.run(
        store.consolidate(
            tenant="default", role="archivist", session_id="main/archivist:a",
            messages=[UserMessage("remember the port is 8080")],
            model=ScriptedModel([ModelError("down")] * 3),
        )
    )  # fmt: skip
    store.close()
    memorize = call_tool("memorize", {"new_passages": ["the port is 8080"]})
    model = HeldModel([memorize])  # until the test has seen the spinner
    with LoopbackOpenAIServer(model) as server:
        pane = pane_for(server, "memory retry")
        spinning = pane.wait_for(lambda t: "consolidating with openai:test… " in t)
        model.release.set()
        (line,) = [ln for ln in spinning.splitlines() if "[1/1] " in ln]
        assert "main/archivist:a (archivist's memory, tenant default)" in line
        assert line.rstrip().endswith("s")  # the elapsed seconds
        screen = pane.wait_for(lambda t: "EXITED" in t)
    assert "EXITED 0" in screen
    assert "applied main/archivist:a (1 passage(s), 0 block(s), " in screen
    assert "consolidating with" not in screen  # the spinner is gone
