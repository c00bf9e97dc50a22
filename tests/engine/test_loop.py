"""The run loop: ending conditions, tool failures as results, cancellation, next_step."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from retinue.engine import Final, RunConfig, RunTools, next_step, run
from retinue.errors import ModelError, RoleError, ToolError
from retinue.messages import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    history_problems,
)
from retinue.testing import ScriptedModel, call_tool, call_tools
from retinue.tools import ToolContext, ToolRegistry, tool

pytestmark = pytest.mark.timeout(60)  # a hang bound, not a timing

started = asyncio.Event()


@tool()
async def add(ctx: ToolContext, a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@tool()
def fail(ctx: ToolContext, how: str) -> str:
    """Fail on purpose."""
    if how == "tool":
        raise ToolError("the disk is full")
    if how == "retinue":
        raise RoleError("unknown role 'x'")
    raise RuntimeError("unexpected")


@tool()
async def wait(ctx: ToolContext, seconds: float) -> str:
    """Sleep."""
    started.set()
    await asyncio.sleep(seconds)
    return "woke"


def config(model: ScriptedModel, tmp_path: Path, **kw) -> RunConfig:
    ctx = ToolContext("main", tmp_path, tmp_path)
    messages = [SystemMessage("sys"), UserMessage("go")]
    return RunConfig(model, messages, ToolRegistry([add, fail, wait]), ctx, **kw)


def test_next_step_is_pure() -> None:
    call = ToolCall("1", "add", "{}")
    assert next_step(AssistantMessage("hi"), interactive=False) == Final("hi", False)
    assert next_step(AssistantMessage("hi"), interactive=True) == Final("hi", True)
    assert next_step(AssistantMessage("", (call,)), interactive=True) == RunTools((call,))


async def test_answer_without_tool_calls_ends_the_run(tmp_path: Path) -> None:
    model = ScriptedModel([call_tool("add", {"a": 2, "b": 3}), "five"])
    out = await run(config(model, tmp_path))
    assert (out.content, out.stop_reason, out.iterations) == ("five", "final", 2)
    assert out.tools_used == ["add"]
    assert out.messages[-1] == AssistantMessage("five")
    asked = out.messages[2]
    assert isinstance(asked, AssistantMessage)
    assert out.messages[3] == ToolResultMessage(asked.tool_calls[0].id, "add", "5")
    assert out.usage.requests == 2 and out.usage.input_tokens > 0
    model.assert_done()


async def test_interactive_answer_is_a_pause(tmp_path: Path) -> None:
    out = await run(config(ScriptedModel(["hello"]), tmp_path, interactive=True))
    assert out.waiting_for_input and out.stop_reason == "waiting_for_input"


async def test_max_iterations_stops_with_a_clear_message(tmp_path: Path) -> None:
    steps = [call_tool("add", {"a": 1, "b": 1}) for _ in range(3)]
    out = await run(config(ScriptedModel(steps), tmp_path, max_iterations=3))
    assert out.stop_reason == "max_iterations"
    assert "max_iterations=3" in out.content


async def test_parallel_calls_keep_call_order_and_failures_become_results(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            call_tools(
                ("wait", {"seconds": 0.05}),
                ("add", {"a": 1, "b": 2}),
                ("fail", {"how": "tool"}),
                ("fail", {"how": "crash"}),
                ("fail", {"how": "retinue"}),
                ("nope", {}),
                ("add", '{"a": 1,'),
                ("add", {"a": "one", "b": 2}),
            ),
            "recovered",
        ]
    )
    out = await run(config(model, tmp_path))
    assert out.content == "recovered"
    results = [m for m in out.messages if isinstance(m, ToolResultMessage)]
    names = ["wait", "add", "fail", "fail", "fail", "nope", "add", "add"]
    assert [r.name for r in results] == names
    assert [r.is_error for r in results] == [False, False, True, True, True, True, True, True]
    assert results[0].content == "woke" and results[1].content == "3"
    assert results[2].content == "Error: the disk is full"
    assert "RuntimeError: unexpected" in results[3].content
    assert results[4].content == "Error: unknown role 'x'"  # Retinue's own errors read plainly
    assert "unknown tool 'nope'" in results[5].content
    assert "not valid JSON" in results[6].content
    assert "a: Input should be a valid integer" in results[7].content
    # the model saw every one of them on its next call
    assert model.calls[1].messages[-8:] == tuple(results)


async def test_model_error_propagates(tmp_path: Path) -> None:
    with pytest.raises(ModelError, match="down"):
        await run(config(ScriptedModel([ModelError("down")]), tmp_path))


async def test_cancellation_mid_tool_propagates_and_leaves_a_valid_history(
    tmp_path: Path,
) -> None:
    started.clear()
    cfg = config(ScriptedModel([call_tool("wait", {"seconds": 30})]), tmp_path)
    task = asyncio.create_task(run(cfg))
    await asyncio.wait_for(started.wait(), 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    last = cfg.messages[-1]
    assert isinstance(last, ToolResultMessage) and last.is_error
    assert "cancelled" in last.content


async def test_a_repeated_failing_call_is_pointed_out(tmp_path: Path) -> None:
    same = call_tool("fail", {"how": "tool"})
    model = ScriptedModel([same, same, same, call_tool("fail", {"how": "crash"}), "ok"])
    out = await run(config(model, tmp_path))
    errors = [m.content for m in out.messages if isinstance(m, ToolResultMessage)]
    assert "failed 3 times in a row" not in errors[1]
    assert "failed 3 times in a row" in errors[2]
    assert "times in a row" not in errors[3]  # a different call starts counting again


async def test_an_empty_final_answer_is_replaced_by_what_happened(tmp_path: Path) -> None:
    model = ScriptedModel([call_tool("add", {"a": 2, "b": 3}), "  \n"])
    out = await run(config(model, tmp_path))
    assert out.stop_reason == "final"
    assert out.content == "(The model ended its turn without an answer, after using: add.)"
    out = await run(config(ScriptedModel([""]), tmp_path))
    assert out.content == "(The model ended its turn without an answer.)"


# -- issue 41: a repeated identical call is stopped long before max_iterations --------------


async def test_the_same_call_with_the_same_result_is_warned_then_stopped(tmp_path: Path) -> None:
    same = call_tool("add", {"a": 1, "b": 1})
    model = ScriptedModel(responder=lambda messages, tools: same)
    out = await run(config(model, tmp_path))  # max_iterations 50
    assert out.stop_reason == "repeated_call" and out.stopped
    assert model.call_count == 4 and out.iterations == 4
    assert out.content.startswith("Stopped:") and "add" in out.content
    results = [m for m in out.messages if isinstance(m, ToolResultMessage)]
    assert [r.content.startswith("2") for r in results] == [True, True, True, False]
    assert "3 times in a row" in results[2].content and "stops the run" in results[2].content
    assert "times in a row" not in results[1].content
    assert results[3].is_error and "not run" in results[3].content  # the 4th never ran
    # the model saw the warning before the call that stopped the run
    assert "3 times in a row" in model.calls[3].messages[-1].content
    assert out.messages[-1] == AssistantMessage(out.content)
    assert history_problems(out.messages) == []
    assert out.tools_used == ["add"] * 3


async def test_a_cycle_of_calls_is_warned_then_stopped(tmp_path: Path) -> None:
    # the task suite's loop: Grep, Grep, Bash, again and again, nothing three times in a row
    a, b = call_tool("add", {"a": 1, "b": 1}), call_tool("add", {"a": 1, "b": 2})
    steps = iter([a, a, b] * 20)
    model = ScriptedModel(responder=lambda messages, tools: next(steps))
    out = await run(config(model, tmp_path))  # max_iterations 50
    assert out.stop_reason == "repeated_call" and out.stopped
    assert model.call_count == 10  # A A B A A B A A (warned: the 6th A) B, then A: stopped
    results = [m for m in out.messages if isinstance(m, ToolResultMessage)]
    assert "6 times in this turn" in results[7].content
    assert not any("times in" in r.content for r in results[:7])
    assert "6 times in this turn" in model.calls[8].messages[-1].content  # seen before B
    assert "7 times in this turn" in out.content and "add" in out.content
    assert results[-1].is_error and "not run" in results[-1].content
    assert history_problems(out.messages) == []


async def test_a_heeded_warning_lets_the_run_go_on(tmp_path: Path) -> None:
    same = call_tool("add", {"a": 1, "b": 1})
    model = ScriptedModel([same, same, same, call_tool("add", {"a": 1, "b": 2}), same, "two"])
    out = await run(config(model, tmp_path))
    assert (out.stop_reason, out.content) == ("final", "two")
    model.assert_done()


async def test_the_same_call_with_a_changing_result_is_not_a_loop(tmp_path: Path) -> None:
    counter = iter(range(100))

    @tool()
    def tick(ctx: ToolContext) -> str:
        """Count."""
        return str(next(counter))

    calls = [call_tool("tick", {}) for _ in range(6)]
    model = ScriptedModel([*calls, "done"])
    ctx = ToolContext("main", tmp_path, tmp_path)
    cfg = RunConfig(model, [SystemMessage("s"), UserMessage("go")], ToolRegistry([tick]), ctx)
    out = await run(cfg)
    assert out.stop_reason == "final" and not out.stopped
    results = [m.content for m in out.messages if isinstance(m, ToolResultMessage)]
    assert results == ["0", "1", "2", "3", "4", "5"]


async def test_a_repeated_identical_failure_stops_too(tmp_path: Path) -> None:
    same = call_tool("fail", {"how": "tool"})
    model = ScriptedModel([same, same, same, same, "never"])
    out = await run(config(model, tmp_path))
    assert out.stop_reason == "repeated_call"
    assert model.call_count == 4
