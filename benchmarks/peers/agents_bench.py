"""OpenAI Agents SDK (``openai-agents``) side of the overhead and delegation benchmarks.

Runs in the peer environment (``benchmarks/.venv-peers``), never in Retinue's. The in-process
fake is a ``Model`` subclass, the SDK's documented way to plug in a model; over loopback the
agent uses ``OpenAIChatCompletionsModel`` against the runner's server. Tracing is disabled
(it would try to export spans to OpenAI). Prints one JSON line.
"""
# pyright: reportMissingImports=false, reportAttributeAccessIssue=false

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import (
    FINAL,
    GRID,
    SYSTEM,
    TOOL_NAME,
    emit_json,
    history_texts,
    median_pair,
    task_text,
    timed,
)
from agents import Agent, ModelResponse, Runner, Usage, function_tool, set_tracing_disabled
from agents.models.interface import Model
from agents.models.openai_chatcompletions import OpenAIChatCompletionsModel
from agents.models.openai_responses import OpenAIResponsesModel
from openai import AsyncOpenAI
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

set_tracing_disabled(True)
_ids = itertools.count(1)


def _usage() -> Usage:
    """The fixed usage figure every framework's fake reports (as Retinue's does)."""
    return Usage(requests=1, input_tokens=100, output_tokens=10, total_tokens=110)


@function_tool(name_override=TOOL_NAME)
def noop() -> str:
    """Do nothing."""
    return "ok"


def _text(text: str) -> ResponseOutputMessage:
    part = ResponseOutputText(type="output_text", text=text, annotations=[])
    return ResponseOutputMessage(
        id=f"msg_{next(_ids)}", type="message", role="assistant", status="completed", content=[part]
    )


def _call(name: str, arguments: str = "{}") -> ResponseFunctionToolCall:
    n = next(_ids)
    return ResponseFunctionToolCall(
        type="function_call", id=f"fc_{n}", call_id=f"call_{n}", name=name, arguments=arguments
    )


class CountingModel(Model):
    """Asks for ``tool`` ``calls`` times, then answers ``final``; ``reset`` starts over."""

    def __init__(self, tool: str, final: str) -> None:
        self.tool, self.final, self.calls, self.left = tool, final, 0, 0

    def reset(self, tool_calls: int) -> None:
        self.left = tool_calls

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        self.calls += 1
        if self.left > 0:
            self.left -= 1
            item: Any = _call(
                self.tool, '{"input": "next step"}' if self.tool != TOOL_NAME else "{}"
            )
        else:
            item = _text(self.final)
        return ModelResponse(output=[item], usage=_usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


class EchoModel(Model):
    """The sub-agent of the delegation benchmark: answers every call at once."""

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        return ModelResponse(output=[_text("sub-agent reply")], usage=_usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


def seeded_input(history: int, task: str) -> list[Any]:
    items: list[Any] = [{"role": role, "content": text} for role, text in history_texts(history)]
    items.append({"role": "user", "content": task})
    return items


async def time_run(
    agent: Agent, fake: CountingModel | None, turns: int, history: int, k: int
) -> tuple[float, float]:
    """Per-turn (wall, CPU) milliseconds of one run; the seeded input is built beforehand."""
    if fake is not None:
        fake.reset(turns - 1)
    items = seeded_input(history, task_text(turns, history, k))
    result, wall, cpu = await timed(Runner.run(agent, items, max_turns=turns + 5))
    if result.final_output != FINAL:
        raise RuntimeError(f"openai-agents run went wrong: {result.final_output!r}")
    return wall / turns, cpu / turns


async def measure(
    agent: Agent, fake: CountingModel | None, repeats: int, grid: dict[str, tuple[int, int]]
) -> dict[str, dict[str, float]]:
    out = {}
    for label, (turns, history) in grid.items():
        await time_run(agent, fake, turns, history, -1)
        out[label] = median_pair(
            [await time_run(agent, fake, turns, history, k) for k in range(repeats)]
        )
    return out


async def delegation(turns: int, repeats: int) -> float:
    """Per-delegation ms: a parent calls a sub-agent wrapped with ``as_tool`` ``turns`` times."""
    sub = Agent(name="worker", instructions="You are the worker.", model=EchoModel())
    parent_model = CountingModel("worker", FINAL)
    parent = Agent(
        name="parent",
        instructions=SYSTEM,
        model=parent_model,
        tools=[sub.as_tool(tool_name="worker", tool_description="Delegate to the worker.")],
    )

    async def one() -> tuple[float, float]:
        parent_model.reset(turns)
        result, wall, cpu = await timed(Runner.run(parent, "delegate please", max_turns=turns + 5))
        if result.final_output != FINAL:
            raise RuntimeError(f"as_tool run went wrong: {result.final_output!r}")
        return wall / turns, cpu / turns

    await one()
    return median_pair([await one() for _ in range(repeats)])["wall"]


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    grid = {k: GRID[k] for k in args.grid.split(",")}
    result: dict[str, Any] = {"framework": "openai-agents", "version": version("openai-agents")}
    if "inproc" in args.variants:
        fake = CountingModel(TOOL_NAME, FINAL)
        agent = Agent(name="bench", instructions=SYSTEM, model=fake, tools=[noop])
        result["inproc"] = await measure(agent, fake, args.repeats, grid)
    if "loopback" in args.variants and args.base_url:
        client = AsyncOpenAI(base_url=args.base_url, api_key="bench")
        model = OpenAIChatCompletionsModel(model="bench", openai_client=client)
        agent = Agent(name="bench", instructions=SYSTEM, model=model, tools=[noop])
        result["loopback"] = await measure(agent, None, args.repeats, grid)
    if "responses" in args.variants and args.responses_url:  # the SDK's default model class
        client = AsyncOpenAI(base_url=args.responses_url, api_key="bench")
        model = OpenAIResponsesModel(model="bench", openai_client=client)
        agent = Agent(name="bench", instructions=SYSTEM, model=model, tools=[noop])
        result["responses"] = await measure(agent, None, args.repeats, grid)
    if args.delegation:
        result["delegation_as_tool"] = await delegation(args.delegation, args.repeats)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description="openai-agents overhead")
    parser.add_argument("--base-url", default="")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--grid", default=",".join(GRID))
    parser.add_argument("--variants", default="inproc,loopback")
    parser.add_argument("--responses-url", default="")
    parser.add_argument("--delegation", type=int, default=0, help="turns of the as_tool run")
    emit_json(asyncio.run(main_async(parser.parse_args())))


if __name__ == "__main__":
    main()
