"""A conversation saved by one process and resumed by another (``Agent.conversation(id)``):
the resumed one is sent the instructions as they are now, an approval the first process
was waiting for when it died is answered in the second, and so is its question
(``AskParent``); a sub-agent's call waiting for approval (durable sessions) is asked for
again (one pause value, :mod:`retinue.engine.pause`, as the HTTP service's conversations).
The first process is a real Python subprocess with the scripted model; the store is SQLite
in the data directory."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest

from retinue import (
    Agent,
    ApprovalRequest,
    AssistantMessage,
    Role,
    SystemMessage,
    ToolResultMessage,
    UserMessage,
)
from retinue.durable import RESTARTED_RESULT, tree_settled
from retinue.llm.base import ToolSpec
from retinue.messages import Message
from retinue.testing import ScriptedModel


def in_another_process(
    tmp_path: Path, program: str, store: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``program`` in a fresh Python (``home``, ``workspace`` and ``store`` defined)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RETINUE_"))}
    env |= {"RETINUE_HOME": str(tmp_path / "home"), "RETINUE_BLOCK_REAL_MODELS": "1"}
    prelude = f"home, workspace = {str(tmp_path / 'home')!r}, {str(tmp_path / 'ws')!r}\n"
    prelude += f"store = {store!r}\n"
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(program)],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


FIRST_PROCESS = """
    import asyncio
    from retinue import Agent
    from retinue.testing import ScriptedModel

    async def main():
        agent = Agent(ScriptedModel(["Hello, Ada."]), instructions="You are OLD.",
                      builtin_tools=False, memory=False, home=home, workspace=workspace)
        out = await agent.conversation("chat-1").send("I am Ada.")
        print(out.content)
        agent.close()

    asyncio.run(main())
"""


def agent_on(model: ScriptedModel, tmp_path: Path, **kwargs: object) -> Agent:
    return Agent(model, builtin_tools=False, memory=False, home=tmp_path / "home",
                 workspace=tmp_path / "ws", **kwargs)  # type: ignore[arg-type]  # fmt: skip


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "ws").mkdir()
    return tmp_path / "ws"


async def test_a_conversation_resumed_in_another_process_gets_the_new_instructions(
    tmp_path: Path, workspace: Path
) -> None:
    done = in_another_process(tmp_path, FIRST_PROCESS)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Hello, Ada."

    model = ScriptedModel(["You are Ada."])
    with agent_on(model, tmp_path, instructions="You are NEW.") as agent:
        conversation = await agent.conversation("chat-1", create=False).load()
        out = await conversation.send("Who am I?")
    assert out.content == "You are Ada."
    sent = model.calls[0].messages
    assert sent[0] == SystemMessage("You are NEW.")
    assert not any(isinstance(m, SystemMessage) for m in sent[1:])  # the old one is gone
    said = [m.content for m in sent if isinstance(m, UserMessage)]
    assert said == ["I am Ada.", "Who am I?"]
    assert "Hello, Ada." in [m.content for m in sent]


DIES_WAITING = """
    import asyncio, os
    from retinue import Agent
    from retinue.testing import ScriptedModel, call_tool

    def approver(request):
        print("asked:", request.tool, flush=True)
        os._exit(3)  # the process dies while the approval waits

    async def main():
        write = call_tool("Write", {"file_path": "deploy.txt", "content": "v2"})
        agent = Agent(ScriptedModel([write]), instructions="Deploy when asked.", memory=False,
                      home=home, workspace=workspace, store=store, approver=approver)
        await agent.conversation("job-7").send("Deploy v2.")

    asyncio.run(main())
"""


@pytest.mark.parametrize("allow", [True, False])
async def test_an_approval_pending_when_the_process_died_is_answered_after_resume(
    tmp_path: Path, workspace: Path, allow: bool
) -> None:
    died = in_another_process(tmp_path, DIES_WAITING)
    assert died.returncode == 3, died.stderr
    assert died.stdout.strip() == "asked: Write"

    asked: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> bool:
        asked.append(request)
        return False

    model = ScriptedModel(["Deployed." if allow else "Not deployed."])
    agent = Agent(model, instructions="Deploy carefully.", memory=False,
                  home=tmp_path / "home", workspace=workspace, approver=approver)  # fmt: skip
    with agent:
        conversation = agent.conversation("job-7", create=False)
        [request] = await conversation.approvals()
        assert (request.tool, request.depth) == ("Write", 0)
        assert not (workspace / "deploy.txt").exists()  # not run before its answer
        out = await conversation.approve(request.id, allow)
        assert out is not None and out.content == ("Deployed." if allow else "Not deployed.")
        assert asked == []  # the stored answer was given to the very call, nobody asked again
        assert await agent.conversation("job-7").approvals() == []  # answered: not stored
    assert (workspace / "deploy.txt").exists() is allow
    sent = model.calls[0].messages
    assert isinstance(sent[0], SystemMessage) and sent[0].content.startswith("Deploy carefully.")
    [result] = [m for m in sent if isinstance(m, ToolResultMessage)]
    assert result.is_error is not allow


async def test_a_new_message_withdraws_a_stored_approval(tmp_path: Path, workspace: Path) -> None:
    died = in_another_process(tmp_path, DIES_WAITING)
    assert died.returncode == 3, died.stderr
    model = ScriptedModel(["Fine, no deploy."])
    with agent_on(model, tmp_path, approver=lambda _: True) as agent:
        conversation = agent.conversation("job-7", create=False)
        out = await conversation.send("Never mind.")
        assert out.content == "Fine, no deploy."
        assert await conversation.approvals() == []
        assert await agent.conversation("job-7").approvals() == []
    assert not (workspace / "deploy.txt").exists()
    [result] = [m for m in model.calls[0].messages if isinstance(m, ToolResultMessage)]
    assert result.is_error


async def test_instructions_changed_in_this_process_reach_the_resumed_conversation(
    tmp_path: Path, workspace: Path
) -> None:
    model = ScriptedModel(["one", "two"])
    with agent_on(model, tmp_path, instructions="Version 1.") as agent:
        await agent.conversation("c").send("a")
        agent.instructions = "Version 2."
        await agent.conversation("c").send("b")  # the same id, resumed from the store
    assert model.calls[0].messages[0] == SystemMessage("Version 1.")
    second = model.calls[1].messages
    assert second[0] == SystemMessage("Version 2.")
    assert [type(m) for m in second] == [SystemMessage, UserMessage, AssistantMessage, UserMessage]


ASKS = """
    import asyncio
    from retinue import Agent
    from retinue.testing import ScriptedModel, call_tool

    async def main():
        ask = call_tool("AskParent", {"question": "Which port?"})
        with Agent(ScriptedModel([ask]), memory=False, home=home, workspace=workspace) as agent:
            out = await agent.conversation("setup").send("Set up the server.")
            print(out.stop_reason, out.content, flush=True)

    asyncio.run(main())
"""


def going_with(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
    last = messages[-1]
    assert isinstance(last, ToolResultMessage) and last.name == "AskParent", last
    return f"Going with {last.content}."


async def test_a_question_asked_before_a_restart_is_answered_after_it(
    tmp_path: Path, workspace: Path
) -> None:
    first = in_another_process(tmp_path, ASKS)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == "asking Which port?"

    model = ScriptedModel([going_with])
    with Agent(model, memory=False, home=tmp_path / "home", workspace=workspace) as agent:
        conversation = await agent.conversation("setup", create=False).load()
        assert conversation.conversation.session.question == "Which port?"
        out = await conversation.send("8080")
        assert out.content == "Going with 8080."
        await conversation.close()


WRITER = Role(name="scribe", description="writes notes", prompt="You write.", tools=("Write",))

SUB_AGENT_WAITS = """
    import asyncio, os
    from retinue import Agent, Role
    from retinue.testing import ScriptedModel, call_tool

    scribe = Role(name="scribe", description="writes notes", prompt="You write.",
                  tools=("Write",))

    def approver(request):
        print("asked:", request.agent_id, request.tool, flush=True)
        os._exit(3)  # the process dies while the sub-agent's approval waits

    async def main():
        task = {"role": "scribe", "task": "Write the note.", "interactive": True}
        write = call_tool("Write", {"file_path": "note.txt", "content": "hello"})
        agent = Agent(ScriptedModel([call_tool("SubAgent", task), write]), roles=[scribe],
                      memory=False, home=home, workspace=workspace, approver=approver,
                      permission_mode="default")
        await agent.conversation("notes").send("Have the scribe write a note.")

    asyncio.run(main())
"""


async def test_a_sub_agents_waiting_approval_is_asked_again_after_a_restart(
    tmp_path: Path, workspace: Path
) -> None:
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "config.toml").write_text("durable_sessions = true\n")
    died = in_another_process(tmp_path, SUB_AGENT_WAITS)
    assert died.returncode == 3, died.stderr
    assert died.stdout.strip() == "asked: conv-notes/scribe Write"

    asked: list[ApprovalRequest] = []

    def approver(request: ApprovalRequest) -> bool:
        asked.append(request)
        return True

    model = ScriptedModel(["Done.", "Done."])
    with Agent(model, roles=[WRITER], memory=False, home=tmp_path / "home",
               workspace=workspace, approver=approver,
               permission_mode="default") as agent:  # fmt: skip
        conversation = await agent.conversation("notes").load()  # (its journal: no turn saved)
        await tree_settled(conversation.conversation)
        assert [(r.agent_id, r.tool, r.depth) for r in asked] == [("conv-notes/scribe", "Write", 1)]
        assert (workspace / "note.txt").read_text() == "hello"
        results = [m for c in model.calls for m in c.messages if isinstance(m, ToolResultMessage)]
        assert not any(r.name == "Write" and r.content == RESTARTED_RESULT for r in results)
        await conversation.close()
