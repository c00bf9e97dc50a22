"""The whole agent on emulated Gemini 3 (``retinue.llm.loopback_gemini``) through the official
SDK: an interactive sub-agent with two turns, and a Gemini sub-agent under a parent on
Claude, every request accepted and no reasoning crossing providers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retinue import Agent, Role
from retinue.llm.anthropic import AnthropicModel
from retinue.llm.gemini import GeminiModel
from retinue.llm.loopback_anthropic import LoopbackAnthropicServer
from retinue.llm.loopback_gemini import LoopbackGeminiServer
from retinue.messages import AssistantMessage
from retinue.testing import ScriptedModel, call_tool
from retinue.tools.base import ToolContext, tool


@tool()
def add(ctx: ToolContext, a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


def _calculator(model: str | None = None) -> Role:
    return Role(
        name="calculator",
        description="Does arithmetic with the add tool",
        prompt="You are a careful calculator.",
        tools=("add",),
        model=model,
    )


def _delegate(task: str) -> AssistantMessage:
    return call_tool("SubAgent", {"task": task, "role": "calculator", "interactive": True})


def _signed_calls(body: dict[str, object]) -> list[tuple[str, bool]]:
    contents = body["contents"]
    assert isinstance(contents, list)
    return [
        (p["functionCall"]["name"], "thoughtSignature" in p)
        for c in contents
        for p in c["parts"]
        if "functionCall" in p
    ]


async def test_an_interactive_sub_agent_on_gemini_keeps_its_signatures_over_two_turns(
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
    with LoopbackGeminiServer(script) as server:
        model = GeminiModel("gemini-3-pro", base_url=server.base_url, max_retries=0)
        agent = Agent(
            model,
            workspace=tmp_path,
            home=tmp_path / "home",
            builtin_tools=False,
            tools=[add],
            roles=[_calculator()],
            memory=False,
        )
        with agent:
            out = await agent.run("Add 2 and 3, then 10, with the calculator.")
        await model.aclose()
    script.assert_done()
    assert out.content == "The calculator says 15."
    assert server.rejected == []
    assert server.request_count == 7
    # the sub-agent's second turn sends its first turn's call back with its signature
    assert _signed_calls(server.requests[4]) == [("add", True)]
    # the parent's last request carries both delegations, each signed
    assert _signed_calls(server.requests[6]) == [("SubAgent", True), ("SubAgent", True)]


async def test_unloading_a_sub_agent_on_gemini_consolidates(tmp_path: Path) -> None:
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
    with LoopbackGeminiServer(script) as server:
        model = GeminiModel("gemini-3-pro", base_url=server.base_url, max_retries=0)
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
    results = [
        p["functionResponse"]["response"]
        for c in server.requests[5]["contents"]
        for p in c["parts"]
        if "functionResponse" in p
    ]
    assert "consolidated" in json.dumps(results[-1])


async def test_a_sub_agent_on_gemini_under_a_parent_on_claude(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each provider gets only its own reasoning: Claude's signed thinking stays on
    Anthropic, Gemini's signatures on Gemini, and neither emulation refuses a request."""
    parent = ScriptedModel([_delegate("add 2 and 3"), _delegate("and 10 more?"), "15."])
    child = ScriptedModel(
        [
            call_tool("add", {"a": 2, "b": 3}, id="t1"),
            "5",
            call_tool("add", {"a": 5, "b": 10}),
            "15",
        ]
    )
    with LoopbackAnthropicServer(parent) as claude, LoopbackGeminiServer(child) as gemini:
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", gemini.base_url)
        model = AnthropicModel("claude-fable-5-2", base_url=claude.base_url, max_retries=0)
        agent = Agent(
            model,
            workspace=tmp_path,
            home=tmp_path / "home",
            builtin_tools=False,
            tools=[add],
            roles=[_calculator("gemini:gemini-3-pro")],
            memory=False,
        )
        with agent:
            out = await agent.run("Add 2 and 3, then 10, with the calculator.")
        await model.aclose()
    parent.assert_done()
    child.assert_done()
    assert out.content == "15."
    assert claude.rejected == [] and gemini.rejected == []
    to_claude, to_gemini = json.dumps(claude.requests), json.dumps(gemini.requests)
    assert "thoughtSignature" not in to_claude and "thought_signature" not in to_claude
    assert '"thinking"' not in to_gemini and "signature_delta" not in to_gemini
    # Claude's last request replays its own thinking; Gemini's its own signatures
    assert '"type": "thinking"' in json.dumps(claude.requests[-1])
    assert _signed_calls(gemini.requests[-1]) == [("add", True), ("add", True)]
