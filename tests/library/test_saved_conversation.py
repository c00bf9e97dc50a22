"""A conversation saved by one process and resumed by another (``Agent.conversation(id)``):
the resumed one is sent the instructions as they are now, and an approval the first process
was waiting for when it died is answered in the second. The first process is a real Python
subprocess with the scripted model; the store is SQLite in the data directory."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from retinue import (
    Agent,
    ApprovalRequest,
    AssistantMessage,
    SystemMessage,
    ToolResultMessage,
    UserMessage,
)
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
