"""SubAgent(..., fork=true): a sub-agent that starts from its parent's conversation.

The parent runs as a real :class:`Session` on a scripted model that records every request;
the fork runs on that same model (a prompt cache belongs to one model), so the recorded
requests show the parent's last request and the fork's first one side by side."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from subagent_kit import RecordingMemory, echo, shout

from retinue.engine import RunConfig
from retinue.engine.session import INTERRUPTED_NOTE, Lifecycle, Session
from retinue.errors import SubAgentError
from retinue.llm.a2a import A2ARemote
from retinue.llm.base import ToolSpec
from retinue.llm.openai import messages_to_openai, tools_to_openai
from retinue.messages import (
    AssistantMessage,
    Message,
    ToolResultMessage,
    UserMessage,
    history_problems,
)
from retinue.subagents import Role, RoleCatalog, SubAgentManager, subagent_tools
from retinue.subagents.fork import NOT_RUN_HERE
from retinue.testing import ScriptedModel, call_tool, call_tools
from retinue.tools import ToolContext, ToolRegistry, tool

PROJECT = "## Project instructions\nAlways write tests."
FORK_HEAD = "[The conversation above is your parent's"


@tool("Remember")
def remember(ctx: ToolContext, fact: str) -> str:
    """Write a fact to memory."""
    return "remembered"


@tool("Wait")
async def wait(ctx: ToolContext) -> str:
    """Wait for something that does not come (until the call is cancelled)."""
    await asyncio.get_running_loop().create_future()
    return "never"


def fork_args(role: str, task: str, **more: Any) -> dict[str, Any]:
    return {"task": task, "role": role, "fork": True, **more}


class Setup:
    """A manager with a few roles, and a main agent that runs as a session on ``model``."""

    def __init__(
        self, tmp_path: Path, model: ScriptedModel, *, max_depth: int = 3, memory: bool = False
    ) -> None:
        self.memory = RecordingMemory()
        self.role_model = ScriptedModel(name="scripted:reviewer")  # never called by a fork
        roles = RoleCatalog.of(
            Role(
                "reviewer",
                "reviews",
                "You are reviewer.",
                ("Echo",),
                "scripted:reviewer",
                frozenset({"memory"}),
                initial_prompt="Check twice.",
            ),
            Role("planner", "plans", "You are planner.", None, None, frozenset({"spawn_agent"})),
            Role("remote", "elsewhere", "", None, a2a=A2ARemote("http://127.0.0.1:9/", None)),
        )
        self.manager = SubAgentManager(
            roles,
            ToolRegistry([echo, shout, wait]),
            default_model=model,
            model_for=lambda name: self.role_model,
            memory=self.memory,
            memory_tools=[remember],
            max_depth=max_depth,
        )
        self.manager.factory.instructions = PROJECT
        self.model = model
        ctx = ToolContext("main", tmp_path, tmp_path, call_chain=("main",), manager=self.manager)
        own = [*subagent_tools(), *([remember] if memory else [])]
        tools = ToolRegistry([echo, shout, wait, *own])
        self.main = Session(
            "main", RunConfig(model, [], tools, ctx), Lifecycle(system_prompt=self._prompt)
        )

    async def _prompt(self) -> str:
        return "You are main.\n\n" + PROJECT

    async def send(self, text: str) -> str:
        async with self.manager.owner("main"):
            return (await self.main.send(text)).content


def wire(messages: Sequence[Message]) -> str:
    """The messages as the OpenAI wire form serialises them."""
    return json.dumps(messages_to_openai(messages))


def tools_wire(tools: Sequence[ToolSpec]) -> str:
    return json.dumps(tools_to_openai(tools))


def assert_prefix(parent: Sequence[Message], fork: Sequence[Message]) -> None:
    """``fork`` starts with ``parent``: the same objects, and the same serialised bytes."""
    assert len(fork) > len(parent)
    assert all(a is b for a, b in zip(parent, fork, strict=False))
    assert wire(fork).startswith(wire(parent)[:-1])  # (less the array's closing bracket)


def valid_request(messages: Sequence[Message]) -> list[str]:
    """What is wrong with ``messages`` as a request (a reply appended ends its turn)."""
    return history_problems([*messages, AssistantMessage("reply")])


def results(messages: Sequence[Message]) -> dict[str, ToolResultMessage]:
    return {m.tool_call_id: m for m in messages if isinstance(m, ToolResultMessage)}


async def test_the_first_request_of_a_fork_repeats_the_parents_last_request(
    tmp_path: Path,
) -> None:
    model = ScriptedModel(
        [
            call_tool("Echo", {"text": "a"}),
            call_tool("SubAgent", fork_args("reviewer", "review it"), id="fork1"),
            call_tool("Echo", {"text": "b"}),  # the fork
            "reviewed",
            "done",  # the parent again
        ]
    )
    s = Setup(tmp_path, model, memory=True)  # (with the memory tool the role has: one list)
    assert await s.send("look at the code") == "done"
    parent, fork = model.calls[1], model.calls[2]
    assert_prefix(parent.messages, fork.messages)
    assert fork.tools == parent.tools and all(  # the same tool list, the same objects
        a is b for a, b in zip(parent.tools, fork.tools, strict=True)
    )
    assert tools_wire(fork.tools) == tools_wire(parent.tools)
    # then the call's step with a result for its call, then the fork's message
    n = len(parent.messages)
    step, result, message = fork.messages[n:]
    assert isinstance(step, AssistantMessage) and step is s.main.messages[n]
    assert step.tool_calls[0].id == "fork1"
    assert isinstance(result, ToolResultMessage) and result.tool_call_id == "fork1"
    assert result.content == NOT_RUN_HERE and not result.is_error
    assert isinstance(message, UserMessage) and message.content.startswith(FORK_HEAD)
    assert message.content.endswith("## Your task\nCheck twice.\n\nreview it")
    assert valid_request(fork.messages) == []
    assert not s.role_model.calls  # on the parent's model
    # what the fork answered is the parent's result for the call
    assert results(s.main.messages)["fork1"].content == "reviewed"
    assert history_problems(s.main.messages) == []


async def test_a_forks_tools_and_memory_follow_its_role(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            call_tool("SubAgent", fork_args("reviewer", "review it"), id="fork1"),
            call_tools(
                ("Shout", {"text": "x"}, "s"),
                ("Echo", {"text": "y"}, "e"),
                ("Remember", {"fact": "f"}, "r"),
            ),
            "reviewed",
            "done",
        ]
    )
    s = Setup(tmp_path, model)
    await s.send("look at the code")
    parent, fork = model.calls[0], model.calls[1]
    # listed: the parent's tools unchanged, then the role's memory tool the parent lacks
    assert fork.tools[: len(parent.tools)] == parent.tools
    assert fork.tool_names[len(parent.tools) :] == ["Remember"]
    # run: only the role's (Echo, and Remember for its memory capability)
    done = results(model.calls[2].messages)
    assert done["s"].is_error and "not allowed" in done["s"].content
    assert done["e"].content == "echo:y" and done["r"].content == "remembered"
    message = fork.messages[-1].content
    assert "You are reviewer." in message and "## Memory of reviewer" in message
    assert "You may use Echo, Remember." in message
    assert PROJECT not in message  # the parent's prompt above already has it
    # the fork consolidates into its role's memory what it added, once; never the prefix
    [(role, sid, own)] = s.memory.consolidated
    assert (role, sid) == ("reviewer", "main/reviewer#1")
    assert own[0].content == message and not any(m in parent.messages for m in own)
    assert history_problems(own) == []


async def test_a_fork_of_a_fork_nests_the_prefixes(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            call_tool("SubAgent", fork_args("planner", "plan it")),
            call_tool("SubAgent", fork_args("reviewer", "check the plan")),  # the planner fork
            "checked",  # the reviewer, forked from the planner fork
            "planned",
            "done",
        ]
    )
    s = Setup(tmp_path, model)
    assert await s.send("make a plan") == "done"
    main, planner, reviewer = (c.messages for c in model.calls[:3])
    assert_prefix(main, planner)
    assert_prefix(planner, reviewer)
    assert "you are main/planner#1/reviewer#2, a fork" in reviewer[-1].content
    assert valid_request(reviewer) == []
    assert model.calls[3].messages[-1].content == "checked"  # the planner's next request
    assert sorted(sid for _, sid, _ in s.memory.consolidated) == [
        "main/planner#1",
        "main/planner#1/reviewer#2",
    ]


async def test_an_interactive_fork_is_a_session_that_goes_on(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            call_tool("SubAgent", fork_args("reviewer", "first", interactive=True), id="c1"),
            "first reply",  # the fork
            call_tool(
                "SubAgent", {"task": "second", "role": "reviewer", "interactive": True}, id="c2"
            ),
            "second reply",  # the fork: the same session, its history goes on
            call_tool("SubAgent", fork_args("reviewer", "again", interactive=True), id="c3"),
            "done",
        ]
    )
    s = Setup(tmp_path, model)
    async with s.manager.owner("main"):
        await s.main.send("review in two steps")
        held = s.manager.registry.by_id("main/reviewer")
        assert held is not None and held.session.turns == 2
        forked = held.session.messages
        assert_prefix(model.calls[0].messages, model.calls[1].messages)
        assert model.calls[3].messages[: len(model.calls[1].messages)] == model.calls[1].messages
        assert history_problems(forked) == []
    done = results(s.main.messages)
    assert done["c1"].content.startswith("first reply")
    assert done["c2"].content.startswith("second reply")
    assert "fork=true starts a new session" in done["c3"].content and done["c3"].is_error
    [(_, sid, own)] = s.memory.consolidated  # at the parent's end, once, its own part
    assert sid == "main/reviewer" and own[0].content.startswith(FORK_HEAD)
    assert [m.content for m in own if isinstance(m, UserMessage)][1] == "second"


def forker(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
    """Main forks the planner in the background, which calls a tool that never ends."""
    last = messages[-1]
    if isinstance(last, UserMessage) and last.content.startswith(FORK_HEAD):
        return call_tool("Wait", id="w")
    if isinstance(last, UserMessage):
        return call_tool(
            "SubAgent", fork_args("planner", "wait", interactive=True, background=True)
        )
    return "started"


async def test_an_interrupted_fork_keeps_a_valid_history(tmp_path: Path) -> None:
    s = Setup(tmp_path, ScriptedModel(responder=forker))
    async with s.manager.owner("main"):
        assert await s.main.send("go") is not None
        held = s.manager.registry.by_id("main/planner")
        assert held is not None
        while not (isinstance(m := held.session.messages[-1], AssistantMessage) and m.tool_calls):
            await asyncio.sleep(0.01)  # until its Wait call runs
        assert s.manager.interrupt("main/planner")
        await held.session.wait_background()
        messages = held.session.messages
        assert messages[-1] == AssistantMessage(INTERRUPTED_NOTE)
        assert results(messages)["w"].is_error
        assert history_problems(messages) == []
        assert history_problems(s.main.messages) == []


async def test_a_parent_interrupted_during_a_fork_leaves_both_histories_valid(
    tmp_path: Path,
) -> None:
    model = ScriptedModel(
        [
            call_tool("SubAgent", fork_args("planner", "wait")),
            call_tool("Wait", id="w"),  # the fork waits until its parent's turn is interrupted
        ]
    )
    s = Setup(tmp_path, model)
    async with s.manager.owner("main"):
        turn = asyncio.ensure_future(s.main.send("go"))
        while len(model.calls) < 2:  # until the fork has asked for its Wait call
            await asyncio.sleep(0.01)
        assert s.main.interrupt()
        assert (await turn).stop_reason == "interrupted"
    assert history_problems(s.main.messages) == []
    [(_, sid, own)] = s.memory.consolidated  # the one-shot fork ended with its parent's call
    assert sid == "main/planner#1" and history_problems(own) == []


async def test_fork_keeps_the_rules_of_delegation(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            call_tools(
                ("SubAgent", fork_args("remote", "go"), "a2a"),  # would send it the conversation
                ("SubAgent", fork_args("planner", "go deeper"), "deep"),
                ("SubAgent", fork_args("reviewer", "x", steer=True, interactive=True), "steer"),
            ),
            call_tool("SubAgent", fork_args("reviewer", "too deep")),  # the planner fork
            "could not",
            "done",
        ]
    )
    s = Setup(tmp_path, model, max_depth=1)
    assert await s.send("go") == "done"
    done = results(s.main.messages)
    assert done["a2a"].is_error and "remote A2A agent" in done["a2a"].content
    assert done["steer"].is_error and "fork=true starts a new one" in done["steer"].content
    assert done["deep"].content == "could not"
    assert "nesting depth limit 1" in results(model.calls[2].messages).popitem()[1].content
    # both forks of that step saw every call of it answered, none run twice
    step = model.calls[1].messages
    assert [r.content for r in step if isinstance(r, ToolResultMessage)] == [NOT_RUN_HERE] * 3
    assert valid_request(step) == []
    assert s.manager.sessions() == []


async def test_fork_needs_a_conversation(tmp_path: Path) -> None:
    """A run that is not a session (a bare ``run``) has no conversation to fork."""
    s = Setup(tmp_path, ScriptedModel())
    ctx = ToolContext("main", tmp_path, tmp_path, call_chain=("main",), manager=s.manager)
    with pytest.raises(SubAgentError, match="needs a conversation to fork"):
        await subagent_tools()[0].invoke(ctx, json.dumps(fork_args("reviewer", "x")))
    assert not s.memory.consolidated and s.manager.sessions() == []
