"""The real embedded model through the normal run loop (needs the 'local' extra).

Marked ``local_model``; skipped when llama-cpp-python or the model parts are not installed.
The model file is assembled once per test session into a temporary RETINUE_HOME.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from retinue.engine import RunConfig, run
from retinue.llm.local import LocalModel
from retinue.messages import SystemMessage, ToolResultMessage, UserMessage
from retinue.tools import ToolContext, ToolRegistry, tool

pytest.importorskip("llama_cpp")
pytestmark = [pytest.mark.local_model, pytest.mark.timeout(600)]


@pytest.fixture
def model(model_home: Path) -> LocalModel:
    return LocalModel("qwen2.5-coder-0.5b", home=model_home, temperature=0.0, seed=7)


@tool()
def add(ctx: ToolContext, a: int, b: int) -> str:
    """Add two integers and return their sum."""
    return str(a + b)


def config(model: LocalModel, tmp_path: Path, question: str) -> RunConfig:
    messages = [
        SystemMessage("You are a careful assistant. Use the add tool for every addition."),
        UserMessage(question),
    ]
    ctx = ToolContext(agent_id="main", workspace=tmp_path, data_dir=tmp_path)
    return RunConfig(model, messages, ToolRegistry([add]), ctx, max_iterations=4)


async def test_model_calls_a_tool_through_the_run_loop(model: LocalModel, tmp_path: Path) -> None:
    out = await run(config(model, tmp_path, "What is 1234 + 4321? Use the add tool."))
    results = [m for m in out.messages if isinstance(m, ToolResultMessage)]
    assert "add" in out.tools_used
    assert any(r.content == "5555" and not r.is_error for r in results), results
    assert out.stop_reason == "final"
    assert "5555" in out.content.replace(",", "")
    assert out.usage.input_tokens > 0 and out.usage.output_tokens > 0


async def test_plain_answer_streams_text_and_reports_usage(model: LocalModel) -> None:
    deltas: list[str] = []
    response = await model.complete(
        [UserMessage("Reply with exactly one word: hello")], on_text=deltas.append
    )
    assert response.message.tool_calls == ()
    assert "hello" in response.message.content.lower()
    assert len(deltas) > 0
    assert "".join(deltas).strip() == response.message.content
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0


async def test_calls_run_one_at_a_time_and_cancel_cleanly(model: LocalModel) -> None:
    long = model.complete([UserMessage("Count from 1 to 500, one number per line.")])
    task = asyncio.ensure_future(long)
    await asyncio.sleep(0.5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    short = await asyncio.wait_for(
        model.complete([UserMessage("Reply with exactly one word: yes")]), timeout=120
    )
    assert short.message.content


async def test_a_streamed_tool_call_is_not_shown_as_text(model: LocalModel) -> None:
    deltas: list[str] = []
    messages = [
        SystemMessage("You are a careful assistant. Use the add tool for every addition."),
        UserMessage("What is 20 + 22? Use the add tool."),
    ]
    response = await model.complete(messages, [add.spec], on_text=deltas.append)
    assert [c.name for c in response.message.tool_calls] == ["add"]
    assert response.finish_reason == "tool_calls"
    assert '"name"' not in "".join(deltas)


async def test_the_grammar_allows_only_offered_tools_with_valid_arguments(
    model: LocalModel,
) -> None:
    messages = [
        SystemMessage("You are a careful assistant."),
        UserMessage('Call the tool "multiply" with x=6 and y=7 now.'),
    ]
    response = await model.complete(messages, [add.spec])
    for call in response.message.tool_calls:
        assert call.name == "add"
        arguments = json.loads(call.arguments)
        assert set(arguments) == {"a", "b"} and all(isinstance(v, int) for v in arguments.values())
    assert response.message.tool_calls or response.message.content.strip()


async def test_calls_leave_optional_arguments_out_and_copy_no_description(
    model: LocalModel,
) -> None:
    """Issue 25, item 5: Read got offset/limit and UnloadSubAgent an instance in every call of
    the task suite, and Write a description as its content."""
    from retinue.subagents.tools import unload_subagent
    from retinue.tools.builtin.fs import read_tool

    specs = [read_tool.spec, unload_subagent.spec]
    required = {s.name: set(s.parameters.get("required", [])) for s in specs}
    system = SystemMessage("You are a coding assistant. Files in the folder: notes.txt, main.py.")
    calls = []
    for request in (
        "Show me the whole of notes.txt.",
        "We are done with the researcher: unload its session.",
    ):
        response = await model.complete([system, UserMessage(request)], specs)
        calls.extend(response.message.tool_calls)
    assert calls, "the model called no tool at all"
    for call in calls:
        arguments = json.loads(call.arguments)
        assert set(arguments) == required[call.name], call
        assert all("path/to/" not in str(v) for v in arguments.values()), call
