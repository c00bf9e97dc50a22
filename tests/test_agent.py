"""The library's ``Agent``: a tool, a role defined in code, delegation, streaming, sync use."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import retinue
from retinue import Agent, Role, ScriptedModel, ToolContext
from retinue.events import RUN_FINISHED, SESSION, TEXT_DELTA, TOOL_STARTED
from retinue.llm import ToolSpec
from retinue.messages import Message, SystemMessage
from retinue.testing import call_tool


@retinue.tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


CALCULATOR = Role(
    name="calculator",
    description="Does arithmetic with the add tool",
    prompt="You are a careful calculator.",
    tools=("add",),
)


def agent(model: ScriptedModel, tmp_path: Path, **kwargs: Any) -> Agent:
    return Agent(model, workspace=tmp_path, home=tmp_path / "home", builtin_tools=False, **kwargs)


def test_an_agent_delegates_to_a_role_defined_in_code(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            call_tool("SubAgent", {"task": "add 2 and 3", "role": "calculator"}),
            call_tool("add", {"a": 2, "b": 3}),
            "5",
            "2 + 3 = 5",
        ]
    )
    with agent(model, tmp_path, tools=[add], roles=[CALCULATOR], memory=False) as a:
        out = a.run_sync("What is 2 + 3? Ask the calculator.")
    assert out.content == "2 + 3 = 5"
    model.assert_done()
    main_call, sub_call = model.calls[0], model.calls[1]
    assert "calculator: Does arithmetic" in str(main_call.messages[0].content)
    assert "add" in main_call.tool_names and "SubAgent" in main_call.tool_names
    assert "Bash" not in main_call.tool_names  # builtin_tools=False
    assert sub_call.tool_names == ["add"]
    assert isinstance(sub_call.messages[0], SystemMessage)
    assert "You are a careful calculator." in sub_call.messages[0].content
    assert model.calls[2].messages[-1].content == "5"  # the tool's result
    assert model.calls[3].messages[-1].content == "5"  # the sub-agent's answer


def test_instructions_replace_the_default_prompt_and_plain_functions_are_tools(
    tmp_path: Path,
) -> None:
    def where(ctx: ToolContext, name: str) -> str:
        """Say where a name is."""
        return f"{name} works in {ctx.workspace.name}"

    model = ScriptedModel([call_tool("where", {"name": "ada"}), "done"])
    a = agent(model, tmp_path, instructions="Answer in one word.", tools=[where], memory=False)
    assert a.run_sync("where is ada?").content == "done"
    assert model.calls[0].messages[0].content.startswith("Answer in one word.")
    assert model.calls[1].messages[-1].content == f"ada works in {tmp_path.name}"
    a.close()


def test_each_run_is_a_fresh_conversation_and_a_conversation_keeps_history(
    tmp_path: Path,
) -> None:
    model = ScriptedModel(["one", "two", "three", "four"])
    a = agent(model, tmp_path, memory=False)
    a.run_sync("first")
    a.run_sync("second")
    assert [m.content for m in model.calls[1].messages if m.role == "user"] == ["second"]

    async def chat() -> None:
        conversation = a.conversation()
        await conversation.send("third")
        await conversation.send("fourth")

    asyncio.run(chat())
    assert [m.content for m in model.calls[3].messages if m.role == "user"] == ["third", "fourth"]
    a.close()


def test_stream_yields_events_and_then_holds_the_output(tmp_path: Path) -> None:
    model = ScriptedModel([call_tool("add", {"a": 1, "b": 1}), "two"])
    seen: list[str] = []
    a = agent(model, tmp_path, tools=[add], memory=False, on_event=lambda e: seen.append(e.kind))

    async def go() -> retinue.AgentStream:
        stream = a.stream("1 + 1?")
        kinds = [(e.kind, e.data.get("text") or e.data.get("name")) async for e in stream]
        assert (TOOL_STARTED, "add") in kinds
        assert (TEXT_DELTA, "two") in kinds
        assert kinds[-1][0] == RUN_FINISHED
        return stream

    stream = asyncio.run(go())
    assert stream.output is not None and stream.output.content == "two"
    assert TOOL_STARTED in seen  # on_event sees every run's events too


def test_concurrent_runs_keep_their_sessions_and_events_apart(tmp_path: Path) -> None:
    role = Role(name="echo", description="Repeats", prompt="Repeat the task.")

    def answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> object:
        last = messages[-1]
        if last.role == "user" and "SubAgent" in [t.name for t in tools]:
            return call_tool(
                "SubAgent", {"task": last.content, "role": "echo", "interactive": True}
            )
        if last.role == "user":
            return f"echo {last.content}"
        return f"parent got {last.content}"

    a = agent(ScriptedModel(responder=answer, delay=0.01), tmp_path, roles=[role], memory=False)

    async def go() -> tuple[list[str], list[str]]:
        async def one(prompt: str) -> list[str]:
            stream = a.stream(prompt)
            ids = [e.agent_id async for e in stream if e.kind == SESSION]
            assert stream.output is not None
            assert stream.output.content.startswith(f"parent got echo {prompt}\n")
            return ids

        first, second = await asyncio.gather(one("a"), one("b"))
        return first, second

    first, second = asyncio.run(go())
    assert first and second
    assert {i.split("/")[0] for i in first + second} == {"main", "main-2"}


def test_roles_defined_in_code_are_checked(tmp_path: Path) -> None:
    bad = Role(name="bad", description="x", prompt="x", tools=("NoSuchTool",))
    a = agent(ScriptedModel(), tmp_path, roles=[bad], memory=False)
    with pytest.raises(retinue.RoleError, match="NoSuchTool"):
        a.run_sync("hi")


def test_a_code_role_with_memory_remembers_what_it_learned(tmp_path: Path) -> None:
    keeper = Role(
        name="keeper",
        description="Keeps notes",
        prompt="Remember things.",
        capabilities=frozenset({"memory"}),
    )
    memorize = call_tool("memorize", {"block_updates": [], "new_passages": ["Ada likes tea"]})
    model = ScriptedModel(
        [
            call_tool("SubAgent", {"task": "Ada likes tea", "role": "keeper"}),
            "noted",
            memorize,
            "The keeper noted it.",
        ]
    )
    with agent(model, tmp_path, roles=[keeper]) as a:
        assert a.run_sync("tell the keeper: Ada likes tea").content == "The keeper noted it."
        memory = a.runtime.memory
        assert memory is not None
        hits = asyncio.run(memory.search("default", "keeper", "tea"))
    assert [h.content for h in hits] == ["Ada likes tea"]
    model.assert_done()


# -- issue 25: builtin_tools=False means only the caller's tools; max_iterations; unload ------

DELEGATION = {"SubAgent", "UnloadSubAgent", "SubAgentStatus", "FindRole"}
MEMORY_TOOLS = {"core_memory_append", "core_memory_replace", "archival_memory_insert",
                "archival_memory_search"}  # fmt: skip


def test_builtin_tools_false_offers_only_the_callers_tools(tmp_path: Path) -> None:
    model = ScriptedModel(["hi"])
    with Agent(model, tools=[add], builtin_tools=False, workspace=tmp_path) as a:  # memory on
        assert a.run_sync("hello").content == "hi"
    [call] = model.calls
    assert call.tool_names == ["add"]
    prompt = str(call.messages[0].content)
    assert "long-term memory" not in prompt and "code-reviewer" not in prompt  # no roles


def test_builtin_tools_false_with_roles_adds_delegation_to_those_roles_only(
    tmp_path: Path,
) -> None:
    model = ScriptedModel(["hi"])
    with Agent(model, tools=[add], roles=[CALCULATOR], builtin_tools=False,
               workspace=tmp_path) as a:  # fmt: skip
        a.run_sync("hello")
        assert list(a.runtime.catalog.roles) == ["calculator"]  # no role files, no examples
    names = set(model.calls[0].tool_names)
    assert names == {"add", *DELEGATION}
    prompt = str(model.calls[0].messages[0].content)
    assert "calculator" in prompt and "code-reviewer" not in prompt


def test_builtin_tools_on_offers_files_shell_delegation_questions_and_memory(
    tmp_path: Path,
) -> None:
    model = ScriptedModel(["hi"])
    with Agent(model, tools=[add], workspace=tmp_path) as a:
        a.run_sync("hello")
    names = set(model.calls[0].tool_names)
    assert {"add", "Read", "Bash", "AskParent", *DELEGATION, *MEMORY_TOOLS} <= names


def test_run_sync_at_max_iterations_returns_and_says_so_in_stop_reason(tmp_path: Path) -> None:
    model = ScriptedModel(responder=lambda messages, tools: call_tool("add", {"a": 1, "b": 1}))
    with agent(model, tmp_path, tools=[add], max_iterations=3, memory=False) as a:
        out = a.run_sync("add forever")
    assert out.stop_reason == "max_iterations" and out.content.startswith("Stopped:")
    assert model.call_count == 3
    with pytest.raises(retinue.RetinueError, match="at least 1"):
        Agent(model, max_iterations=0)


async def test_unloading_a_session_that_never_started_says_nothing_was_consolidated(
    tmp_path: Path,
) -> None:
    model = ScriptedModel(["5"])
    with agent(model, tmp_path, tools=[add], roles=[CALCULATOR]) as a:  # memory on
        runtime = a.runtime
        ctx = runtime.context("main")
        runtime.manager.start_background(ctx, "add 2 and 3", "calculator")  # not begun yet
        confirm = await runtime.manager.unload_subagent("main", "calculator")
        assert "nothing to consolidate" in confirm and "was consolidated" not in confirm
        assert model.call_count == 0
        # one that worked is consolidated (the memorize call), and says so
        model.add("5", call_tool("memorize", {"block_updates": [], "new_passages": []}))
        await runtime.manager.interactive_subagent(ctx, "add 2 and 3", "calculator")
        confirm = await runtime.manager.unload_subagent("main", "calculator")
        assert "after 1 turn(s); what it learned was consolidated" in confirm
    model.assert_done()


def test_a_test_gets_a_temporary_data_directory_by_default(tmp_path: Path) -> None:
    with Agent(ScriptedModel(["hi"]), workspace=tmp_path) as a:  # no home= given
        a.run_sync("hello")
        home = a.runtime.settings.home
    assert home != Path.home() / ".retinue"  # tests/conftest.py set RETINUE_HOME
    assert home.name.startswith("retinue-home") and (home / "memory.db").is_file()
