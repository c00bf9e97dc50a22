"""Saving by hand, as the issue measured it: a history restored into a conversation
(``Conversation.restore``) is sent with the system prompt as it is now, whether the history
carries an old one or none, and on a resumed turn (``resume()``) as on a new message."""

from __future__ import annotations

from pathlib import Path

import pytest

from retinue import Agent, AssistantMessage, Message, SystemMessage, ToolCall, UserMessage
from retinue.testing import ScriptedModel

SAID: list[Message] = [UserMessage("Hi"), AssistantMessage("Hello.")]


@pytest.mark.parametrize("history", [[SystemMessage("You are OLD."), *SAID], SAID])
async def test_a_restored_history_gets_the_current_system_prompt(
    tmp_path: Path, history: list[Message]
) -> None:
    model = ScriptedModel(["Again."])
    with Agent(model, instructions="You are NEW.", builtin_tools=False, memory=False,
               workspace=tmp_path) as agent:  # fmt: skip
        conversation = agent.conversation()
        conversation.restore(history)
        await conversation.send("Once more.")
        assert conversation.messages[0] == SystemMessage("You are NEW.")
    assert model.calls[0].messages == (
        SystemMessage("You are NEW."), *SAID, UserMessage("Once more.")
    )  # fmt: skip


async def test_a_resumed_turn_gets_the_current_system_prompt(tmp_path: Path) -> None:
    def echo(text: str) -> str:
        return text

    cut = AssistantMessage("", (ToolCall("c1", "echo", '{"text": "x"}'),))
    model = ScriptedModel(["Done."])
    with Agent(model, instructions="You are NEW.", tools=[echo], builtin_tools=False,
               memory=False, workspace=tmp_path) as agent:  # fmt: skip
        conversation = agent.conversation()
        conversation.restore([SystemMessage("You are OLD."), UserMessage("Echo x."), cut],
                             pending_calls=True)  # fmt: skip
        out = await conversation.resume()
    assert out.content == "Done."
    sent = model.calls[0].messages
    assert sent[0] == SystemMessage("You are NEW.") and sent[-1].content == "x"
