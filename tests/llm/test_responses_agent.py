"""The whole agent on an emulated gpt-5.6-terra over the Responses API: a parent and an
interactive sub-agent with two turns, every request accepted by the emulated rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retinue import Agent, Role
from retinue.llm.loopback_anthropic import LoopbackAnthropicServer
from retinue.llm.loopback_responses import LoopbackResponsesServer
from retinue.llm.openai_responses import OpenAIResponsesModel
from retinue.messages import AssistantMessage
from retinue.testing import ScriptedModel, call_tool
from retinue.tools.base import ToolContext, tool


@tool()
def add(ctx: ToolContext, a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


CALCULATOR = Role(
    name="calculator",
    description="Does arithmetic with the add tool",
    prompt="You are a careful calculator.",
    tools=("add",),
)


def _delegate(task: str) -> AssistantMessage:
    return call_tool("SubAgent", {"task": task, "role": "calculator", "interactive": True})


async def test_an_interactive_sub_agent_keeps_its_reasoning_over_two_turns(
    tmp_path: Path,
) -> None:
    script = ScriptedModel(
        [
            _delegate("add 2 and 3"),  # parent
            call_tool("add", {"a": 2, "b": 3}, id="s1"),  # sub-agent, turn 1
            "5",
            _delegate("now add 10 to that"),  # parent
            call_tool("add", {"a": 5, "b": 10}, id="s2"),  # sub-agent, turn 2
            "15",
            "The calculator says 15.",  # parent
        ]
    )
    with LoopbackResponsesServer(script) as server:
        model = OpenAIResponsesModel("gpt-5.6-terra", base_url=server.base_url, max_retries=0)
        agent = Agent(
            model,
            workspace=tmp_path,
            home=tmp_path / "home",
            builtin_tools=False,
            tools=[add],
            roles=[CALCULATOR],
            memory=False,
        )
        with agent:
            out = await agent.run("Add 2 and 3, then 10, with the calculator.")
        await model.aclose()
    script.assert_done()
    assert out.content == "The calculator says 15."
    assert server.rejected == []
    assert server.request_count == 7
    # the sub-agent's second turn replays its first turn's reasoning before each call
    sub_turn_two = server.requests[4]["input"]
    assert [i.get("type") or i.get("role") for i in sub_turn_two] == [
        "user",
        "reasoning",
        "function_call",
        "function_call_output",
        "reasoning",
        "assistant",
        "user",
    ]
    replies = [server.requests[2]["input"][1], server.requests[2]["input"][2]]
    assert sub_turn_two[1:3] == replies
    # the parent's last request carries its two delegations with their reasoning
    parent_last = server.requests[6]["input"]
    assert [i.get("type") for i in parent_last].count("reasoning") == 2


async def test_unloading_the_sub_agent_consolidates_over_responses(tmp_path: Path) -> None:
    keeper = Role(
        name="calculator",
        description="Does arithmetic with the add tool",
        prompt="You are a careful calculator.",
        tools=("add",),
        capabilities=frozenset({"memory"}),
    )
    script = ScriptedModel(
        [
            _delegate("add 2 and 3"),  # parent
            call_tool("add", {"a": 2, "b": 3}, id="s1"),  # sub-agent
            "5",
            call_tool("UnloadSubAgent", {"role": "calculator"}),  # parent
            call_tool("memorize", {"block_updates": [], "new_passages": ["2 + 3 = 5"]}),
            "Done: 5.",  # parent
        ]
    )
    with LoopbackResponsesServer(script) as server:
        model = OpenAIResponsesModel("gpt-5.6-terra", base_url=server.base_url, max_retries=0)
        agent = Agent(
            model,
            workspace=tmp_path,
            home=tmp_path / "home",
            builtin_tools=False,
            tools=[add],
            roles=[keeper],
        )
        with agent:
            out = await agent.run("Add 2 and 3 with the calculator, then let it go.")
        await model.aclose()
    script.assert_done()
    assert out.content == "Done: 5."
    assert server.rejected == []
    results = [i for i in server.requests[5]["input"] if i.get("type") == "function_call_output"]
    assert "consolidated" in results[-1]["output"]


async def test_a_sub_agent_on_claude_under_a_parent_on_responses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each provider gets only its own reasoning: the parent's items stay on OpenAI, the
    sub-agent's signed thinking on Anthropic, and neither emulation refuses a request."""
    reviewer = Role(
        name="calculator",
        description="Does arithmetic with the add tool",
        prompt="You are a careful calculator.",
        tools=("add",),
        model="anthropic:claude-fable-5-2",
    )
    parent = ScriptedModel([_delegate("add 2 and 3"), _delegate("and 10 more?"), "15."])
    child = ScriptedModel(
        [
            call_tool("add", {"a": 2, "b": 3}, id="t1"),
            "5",
            call_tool("add", {"a": 5, "b": 10}),
            "15",
        ]
    )
    with LoopbackResponsesServer(parent) as openai, LoopbackAnthropicServer(child) as claude:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", claude.base_url)
        model = OpenAIResponsesModel("gpt-5.6-terra", base_url=openai.base_url, max_retries=0)
        agent = Agent(
            model,
            workspace=tmp_path,
            home=tmp_path / "home",
            builtin_tools=False,
            tools=[add],
            roles=[reviewer],
            memory=False,
        )
        with agent:
            out = await agent.run("Add 2 and 3, then 10, with the calculator.")
        await model.aclose()
    parent.assert_done()
    child.assert_done()
    assert out.content == "15."
    assert openai.rejected == [] and claude.rejected == []
    assert all(i.get("type") != "thinking" for b in openai.requests for i in b["input"])
    sent = json.dumps(claude.requests)
    assert "encrypted_content" not in sent and '"rs_' not in sent
