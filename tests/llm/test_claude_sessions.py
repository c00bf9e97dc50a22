"""Sub-agents on an emulated Claude Fable 5.2 (``loopback_anthropic``): an interactive session
keeps working across turns with its thinking blocks, and a refusal reaches the parent."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from retinue.engine import RunConfig, run
from retinue.llm.anthropic import AnthropicModel
from retinue.llm.base import Model, ModelResponse, ToolSpec
from retinue.llm.loopback_anthropic import LoopbackAnthropicServer
from retinue.llm.settings import ModelSettings
from retinue.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolResultMessage,
    UserMessage,
)
from retinue.subagents import Role, RoleCatalog, SubAgentManager, subagent_tools
from retinue.subagents.role_files import read_role_file
from retinue.subagents.roles import parse_role
from retinue.testing import ScriptedModel, call_tool
from retinue.tools import ToolContext, ToolRegistry, tool

pytestmark = pytest.mark.timeout(20)

FABLE = "claude-fable-5-2"


@tool("Echo")
def echo(ctx: ToolContext, text: str) -> str:
    """Echo the text back."""
    return f"echo:{text}"


class Consolidations:
    """A Memory that records what it is asked to consolidate."""

    def __init__(self) -> None:
        self.histories: list[list[Message]] = []

    async def render(self, tenant: str, role: str) -> str:
        return ""

    async def consolidate(
        self, *, tenant: str, role: str, session_id: str, messages: Sequence[Message], model: Model
    ) -> bool:
        self.histories.append(list(messages))
        return True


@pytest.fixture
def fable() -> Iterator[Any]:
    servers: list[LoopbackAnthropicServer] = []

    def start(script: list[Any]) -> LoopbackAnthropicServer:
        server = LoopbackAnthropicServer(ScriptedModel(script), redact=True).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.close()


_models: list[AnthropicModel] = []


@pytest.fixture(autouse=True)
async def _close() -> AsyncIterator[None]:
    yield
    while _models:
        await _models.pop().aclose()


def manager_on(
    server: LoopbackAnthropicServer, memory: Consolidations, role: Role | None = None
) -> SubAgentManager:
    def model_for(name: str) -> Model:
        assert name == f"anthropic:{FABLE}"
        model = AnthropicModel(FABLE, base_url=server.base_url, max_retries=0)
        _models.append(model)
        return model

    role = role or Role(
        "reviewer", "Reviews things", "You review.", ("Echo",), f"anthropic:{FABLE}"
    )
    return SubAgentManager(
        RoleCatalog.of(role),
        ToolRegistry([echo]),
        default_model=ScriptedModel(name="scripted:default"),
        model_for=model_for,
        memory=memory,
    )


def ctx(workspace: Path, manager: SubAgentManager) -> ToolContext:
    return ToolContext(
        "main", workspace, workspace, role="main", call_chain=("main",), manager=manager
    )


async def test_two_turns_of_an_interactive_fable_session_then_unload(
    fable: Any, tmp_path: Path
) -> None:
    script = [call_tool("Echo", {"text": "a"}), "first", call_tool("Echo", {"text": "b"}), "second"]
    server = fable(script)
    memory = Consolidations()
    manager = manager_on(server, memory)
    parent = ctx(tmp_path, manager)
    async with manager.owner("main"):
        one = await manager.interactive_subagent(parent, "look at a", "reviewer")
        two = await manager.interactive_subagent(parent, "now b", "reviewer")
        assert (one.content, two.content) == ("first", "second")
        await manager.unload_subagent("main", "reviewer")
    assert server.rejected == [] and len(server.requests) == 4
    # the last request carries every earlier tool turn with its signed blocks first
    assistant = [m for m in server.requests[-1]["messages"] if m["role"] == "assistant"]
    assert [m["content"][0]["type"] for m in assistant] == ["thinking"] * 3
    [history] = memory.histories
    replies = [m for m in history if isinstance(m, AssistantMessage)]
    assert len(replies) == 4 and all(r.reasoning for r in replies)


async def test_a_refused_sub_agent_is_an_error_result_for_its_parent(
    fable: Any, tmp_path: Path
) -> None:
    server = fable([ModelResponse(AssistantMessage(""), finish_reason="refusal")])
    manager = manager_on(server, Consolidations())

    def answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        result = messages[-1]
        assert isinstance(result, ToolResultMessage) and result.is_error
        return f"told: {result.content}"

    parent_model = ScriptedModel(
        [call_tool("SubAgent", {"task": "do it", "role": "reviewer"}), answer]
    )
    config = RunConfig(
        parent_model,
        [SystemMessage("main"), UserMessage("delegate")],
        ToolRegistry([echo, *subagent_tools()]),
        ctx(tmp_path, manager),
    )
    async with manager.owner("main"):
        out = await run(config)
    assert "declined to answer" in out.content and "anthropic:claude-fable-5-2" in out.content


ROLE_FILE = """---
name: reviewer
description: Reviews things
model: fable
tools: Echo
effort: high
max_output_tokens: 20000
temperature: hot
---
You review.
"""


async def test_role_file_settings_reach_the_request_body(fable: Any, tmp_path: Path) -> None:
    path = tmp_path / "reviewer.md"
    path.write_text(ROLE_FILE)
    role = parse_role(path, read_role_file(path))
    assert role.model == f"anthropic:{FABLE}" and role.ignored == ()
    assert role.model_settings == ModelSettings(effort="high", max_output_tokens=20_000)
    assert any("temperature must be a number" in n for n in role.notes)
    server = fable(["done"])
    manager = manager_on(server, Consolidations(), role)
    async with manager.owner("main"):
        out = await manager.interactive_subagent(ctx(tmp_path, manager), "go", "reviewer")
    assert out.content == "done" and server.rejected == []
    body = server.requests[0]
    assert body["output_config"] == {"effort": "high"} and body["max_tokens"] == 20_000


async def test_a_fable_parent_with_a_sub_agent_on_another_provider(
    fable: Any, tmp_path: Path
) -> None:
    from retinue.llm.loopback import LoopbackOpenAIServer
    from retinue.llm.openai import OpenAIModel

    parent_server = fable(
        [call_tool("SubAgent", {"task": "count", "role": "counter"}), call_tool("Echo", {}), "3"]
    )
    with LoopbackOpenAIServer(ScriptedModel(["three"])) as child_server:
        child = OpenAIModel("local-model", base_url=child_server.base_url, api_key="k")
        parent = AnthropicModel(FABLE, base_url=parent_server.base_url, max_retries=0)
        _models.append(parent)
        role = Role("counter", "Counts", "You count.", ("Echo",), "openai:local-model")
        manager = SubAgentManager(
            RoleCatalog.of(role),
            ToolRegistry([echo]),
            default_model=parent,
            model_for=lambda name: child,
            memory=Consolidations(),
        )
        config = RunConfig(
            parent,
            [SystemMessage("main"), UserMessage("count with a helper")],
            ToolRegistry([echo, *subagent_tools()]),
            ctx(tmp_path, manager),
        )
        async with manager.owner("main"):
            out = await run(config)
        await child.aclose()
    assert out.content == "3" and parent_server.rejected == []
    assert "thinking" not in str(child_server.requests)  # nothing of Claude's went there
    results = [m for m in out.messages if isinstance(m, ToolResultMessage)]
    assert results[0].content == "three" and not results[0].is_error
