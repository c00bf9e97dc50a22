"""The library's ``Agent`` when its main agent asks: ``run`` (a conversation nobody keeps)
tells it to decide; a kept conversation lets the caller answer."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from retinue import Agent
from retinue.llm import ToolSpec
from retinue.messages import Message, ToolResultMessage
from retinue.subagents.tools import NO_ANSWER
from retinue.testing import ScriptedModel, call_tool

QUESTION = call_tool("AskParent", {"question": "Which port?"})


def going_with(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
    result = next(m for m in reversed(messages) if isinstance(m, ToolResultMessage))
    return f"going with {result.content}"


def test_run_answers_for_nobody_and_a_conversation_lets_the_caller_answer(
    tmp_path: Path,
) -> None:
    model = ScriptedModel([QUESTION, going_with, QUESTION, going_with])
    with Agent(model, workspace=tmp_path, home=tmp_path / "home", memory=False) as agent:
        assert agent.run_sync("set it up").content == f"going with {NO_ANSWER}"

        async def chat() -> list[str]:
            conversation = agent.conversation()
            asked = await conversation.send("set it up")
            assert asked.asking
            return [asked.content, (await conversation.send("8080")).content]

        assert asyncio.run(chat()) == ["Which port?", "going with 8080"]
