"""``retinue chat`` when the main agent asks: the question is shown and the next line answers
it inside the same turn."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

import pytest
from rich.console import Console
from test_chat import start_chat
from test_run import retinue

from retinue.cli.remote import _state
from retinue.cli.render import EventPrinter
from retinue.events import SESSION, Event
from retinue.llm.base import ToolSpec
from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.messages import Message, ToolResultMessage
from retinue.testing import ScriptedModel, call_tool

pytestmark = pytest.mark.timeout(60)


def going_with(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
    result = next(m for m in reversed(messages) if isinstance(m, ToolResultMessage))
    return f"Going with {result.content}."


def test_the_next_line_answers_the_main_agents_question(tmp_path: Path) -> None:
    model = ScriptedModel([call_tool("AskParent", {"question": "Which port?"}), going_with])
    with LoopbackOpenAIServer(model) as server:
        chat = start_chat(server, tmp_path)
        out, err = chat.communicate("set up the server\n8080\n/exit\n", timeout=40)
    assert chat.returncode == 0, err
    assert "? Which port?" in out and "Going with 8080." in out
    last = model.calls[-1].messages
    assert [m.content for m in last if m.role == "user"] == ["set up the server"]


def test_the_tree_and_the_sessions_table_show_questions_and_steering() -> None:
    printer = EventPrinter(Console(file=io.StringIO()))
    asking = Event(SESSION, "main/a", {"action": "asking", "question": "Which [b]port[/b]?"})
    line = printer.describe(asking)
    assert line is not None and line.endswith("asking: Which \\[b]port\\[/b]?")
    session = {"state": "asking", "question": "Which port?", "steered": 2}
    assert _state(session) == "asking: Which port? (steered 2×)"
    assert _state({"state": "idle", "question": None, "steered": 0}) == "idle"


def test_retinue_run_without_a_terminal_tells_the_agent_to_decide(tmp_path: Path) -> None:
    model = ScriptedModel([call_tool("AskParent", {"question": "Which port?"}), going_with])
    with LoopbackOpenAIServer(model) as server:
        done = retinue(["run", "-m", "openai:test", "set up the server"], server, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "? Which port?" in done.stderr
    assert done.stdout.startswith("Going with (Nobody can answer now")
