"""``retinue chat`` while a session's memory is consolidated after its turn (issue 25, item 3):
the turn does not wait for it, the next message is answered meanwhile, ``/exit`` waits for it
and says so, and Ctrl-C there stops it at once with the transcript kept for retry."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

import pytest
from test_chat import start_chat  # (tests/cli is on the path)

from retinue.config import Settings
from retinue.llm.base import ModelResponse, TextCallback, ToolSpec
from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.messages import Message
from retinue.runtime import Runtime
from retinue.testing import ScriptedModel, call_tool
from retinue.tools.builtin.todo import todo_path

pytestmark = pytest.mark.timeout(300)  # a hang bound: a chat starts slowly under load

ASK = {"role": "researcher", "interactive": True}
MEMORIZE = call_tool("memorize", {"block_updates": [], "new_passages": ["the answer is 42"]})


Responder = Callable[[Sequence[Message], Sequence[ToolSpec]], Any]


def answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
    """The main agent asks the researcher, which answers; consolidation memorizes; the
    main agent answers its second message (whatever order the calls come in)."""
    if "memorize" in [t.name for t in tools]:
        return MEMORIZE
    last = messages[-1]
    if last.role == "tool":
        return "done one."
    if last.content == "look":
        return "found it"
    if last.content == "check it":
        return call_tool("SubAgent", {"task": "look", **ASK})
    return "done two."


class GatedModel(ScriptedModel):
    """A scripted model whose ``memorize`` calls (consolidation) answer only once ``gate``
    is set: a consolidation as slow as the test wants, with nothing timed."""

    def __init__(self, gate: threading.Event, responder: Responder = answer) -> None:
        super().__init__(responder=responder)
        self.gate = gate
        self.memorize_asked = threading.Event()

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        *,
        on_text: TextCallback | None = None,
    ) -> ModelResponse:
        response = await super().complete(messages, tools, on_text=on_text)  # (its step now)
        if "memorize" in [t.name for t in tools]:
            self.memorize_asked.set()
            await asyncio.to_thread(self.gate.wait, 50)
        return response


class Output:
    """What a stream has written so far, read by a thread."""

    def __init__(self, stream: IO[str]) -> None:
        self.text = ""
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.text += line

    def wait_for(self, found: Callable[[str], bool], what: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not found(self.text):
            if time.monotonic() > deadline:
                raise AssertionError(f"never saw {what}; so far:\n{self.text}")
            time.sleep(0.05)

    def join(self) -> str:
        self._thread.join(timeout=20)
        return self.text


def type_in(chat: subprocess.Popen[str], text: str) -> None:
    assert chat.stdin is not None
    chat.stdin.write(text)
    chat.stdin.flush()


def test_the_next_message_is_answered_while_the_last_turns_session_consolidates(
    tmp_path: Path,
) -> None:
    gate = threading.Event()
    model = GatedModel(gate)
    with LoopbackOpenAIServer(model) as server:
        chat = start_chat(server, tmp_path)
        out, err = Output(chat.stdout), Output(chat.stderr)  # type: ignore[arg-type]
        try:
            type_in(chat, "check it\nand now?\n")
            # the second answer comes while the consolidation's model call is still held
            out.wait_for(lambda t: "done two." in t, "the second answer")
            assert model.memorize_asked.wait(30)
        finally:
            gate.set()
        type_in(chat, "/exit\n")
        assert chat.stdin is not None
        chat.stdin.close()
        assert chat.wait(timeout=40) == 0, err.join()
    errors = err.join()
    assert "consolidating researcher's memory in the background" in errors
    assert "main/researcher memory consolidated" in errors
    assert "Traceback" not in errors
    assert sum("memorize" in [t.name for t in c.tools] for c in model.calls) == 1


def test_ctrl_c_while_exit_waits_stops_the_consolidation_and_keeps_the_transcript(
    tmp_path: Path,
) -> None:
    gate = threading.Event()  # never set: the consolidation would wait 50 s
    model = GatedModel(gate)
    with LoopbackOpenAIServer(model) as server:
        chat = start_chat(server, tmp_path)
        out, err = Output(chat.stdout), Output(chat.stderr)  # type: ignore[arg-type]
        try:
            type_in(chat, "check it\n")
            out.wait_for(lambda t: "done one." in t, "the answer")
            type_in(chat, "/exit\n")
            err.wait_for(lambda t: "Ctrl-C keeps it for later" in t, "the wait at /exit")
            model.memorize_asked.wait(30)
            chat.send_signal(signal.SIGINT)  # once: it stops at once
            assert chat.wait(timeout=20) == 0, err.join()
        finally:
            gate.set()
    errors = err.join()
    assert "consolidation stopped: the transcripts are kept in pending/" in errors
    assert "retinue memory retry" in errors
    kept = list((tmp_path / "home" / "pending").glob("*.failed.json"))
    assert len(kept) == 1
    transcript = json.loads(kept[0].read_text())
    assert transcript["session_id"] == "main/researcher"
    assert "abandoned" in transcript["error"]
    assert any(m.get("content") == "look" for m in transcript["messages"])


SCRIBE = "---\nname: scribe\ndescription: keeps a task list\ntools: [TodoWrite]\n"
SCRIBE += "capabilities: [memory]\n---\nYou keep a task list.\n"


def scribe_script(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
    """Two messages, each opening the interactive session main/scribe; the second one's
    session writes a task list."""
    if "memorize" in [t.name for t in tools]:
        return MEMORIZE
    first = next(m.content for m in messages if m.role == "user")
    last = messages[-1]
    if "SubAgent" not in [t.name for t in tools]:  # a scribe session
        if first == "two" and last.role != "tool":
            return call_tool("TodoWrite", {"todos": [{"content": "file it", "status": "pending"}]})
        return f"scribe did {first}"
    if last.role == "tool":
        return f"main after {last.content[-3:]}"
    return call_tool("SubAgent", {"task": last.content, "role": "scribe", "interactive": True})


async def test_a_role_reopened_while_its_last_session_consolidates_is_a_new_session(
    tmp_path: Path,
) -> None:
    (tmp_path / ".retinue" / "agents").mkdir(parents=True)
    (tmp_path / ".retinue" / "agents" / "scribe.md").write_text(SCRIBE)
    gate = threading.Event()
    model = GatedModel(gate, scribe_script)
    settings = Settings.load(workspace=tmp_path, home=tmp_path / "home")
    runtime = Runtime.create(settings, model=model)
    conversation = runtime.conversation(consolidate_later=True)
    try:
        await conversation.send("one")  # returns before the session's memory is written
        assert conversation.consolidating() == ["main/scribe"]
        assert runtime.manager.sessions() == []  # it left the registry: the role is free
        await asyncio.to_thread(model.memorize_asked.wait, 30)
        conversation.keep_sessions = True  # (the second session stays after its turn)
        out = await conversation.send("two")  # a new main/scribe, while the first consolidates
        assert out.content.startswith("main after")
        scribes = [c for c in model.calls if not {"SubAgent", "memorize"} & set(c.tool_names)]
        assert [c.messages[1].content for c in scribes] == ["one", "two", "two"]
        todos = todo_path(runtime.context("main").data_dir, "main/scribe")
        assert todos.exists()  # the second session's list
        gate.set()
        await conversation.settled()
        assert todos.exists()  # the first session's close did not take the second's list
        assert conversation.consolidating() == []
        assert [s.id for s in runtime.manager.sessions()] == ["main/scribe"]  # the second
    finally:
        gate.set()
        await conversation.close()
        if runtime.memory is not None:
            runtime.memory.close()
    memorized = [c for c in model.calls if "memorize" in c.tool_names]
    assert len(memorized) == 2  # each session consolidated exactly once
    assert not todos.exists()  # and the second's list went with it
