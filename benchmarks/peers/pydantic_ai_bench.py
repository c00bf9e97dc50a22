"""pydantic-ai side of the overhead benchmark.

Runs in the peer environment (``benchmarks/.venv-peers``). The in-process fake is pydantic-ai's
own ``FunctionModel``; over loopback the agent uses ``OpenAIChatModel`` with an
``OpenAIProvider`` pointed at the runner's server. The request limit is lifted (its default is
50). Prints one JSON line.
"""
# pyright: reportMissingImports=false, reportAttributeAccessIssue=false

from __future__ import annotations

import argparse
import asyncio
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
    wanted_turns,
)
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.usage import RequestUsage, UsageLimits

NO_LIMIT = UsageLimits(request_limit=None)
USAGE = RequestUsage(input_tokens=100, output_tokens=10)


async def fake(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Stateless, like the loopback server: count tool returns since the last user prompt.

    Async (no hop to a worker thread) and with a usage figure (no token estimate over the
    whole history), as Retinue's fake.
    """
    done = 0
    for m in reversed(messages):
        for part in m.parts:
            if isinstance(part, UserPromptPart):
                if done < wanted_turns(str(part.content)) - 1:
                    return ModelResponse(parts=[ToolCallPart(TOOL_NAME, {})], usage=USAGE)
                return ModelResponse(parts=[TextPart(FINAL)], usage=USAGE)
            if isinstance(part, ToolReturnPart):
                done += 1
    return ModelResponse(parts=[TextPart(FINAL)], usage=USAGE)


def build_agent(model: Any) -> Agent[None, str]:
    agent = Agent(model, system_prompt=SYSTEM)

    @agent.tool_plain(name=TOOL_NAME)
    def noop() -> str:
        """Do nothing."""
        return "ok"

    return agent


def seeded_history(history: int) -> list[ModelMessage]:
    if not history:
        return []
    out: list[ModelMessage] = []
    for i, (role, text) in enumerate(history_texts(history)):
        if role == "user":
            parts: list[Any] = [SystemPromptPart(SYSTEM)] if i == 0 else []
            out.append(ModelRequest(parts=[*parts, UserPromptPart(text)]))
        else:
            out.append(ModelResponse(parts=[TextPart(text)]))
    return out


async def time_run(
    agent: Agent[None, str], turns: int, history: int, k: int
) -> tuple[float, float]:
    """Per-turn (wall, CPU) milliseconds of one run; the seeded history is built beforehand."""
    seeded = seeded_history(history)
    task = task_text(turns, history, k)
    result, wall, cpu = await timed(agent.run(task, message_history=seeded, usage_limits=NO_LIMIT))
    if result.output != FINAL:
        raise RuntimeError(f"pydantic-ai run went wrong: {result.output!r}")
    return wall / turns, cpu / turns


async def measure(
    agent: Agent[None, str], repeats: int, grid: dict[str, tuple[int, int]]
) -> dict[str, dict[str, float]]:
    out = {}
    for label, (turns, history) in grid.items():
        await time_run(agent, turns, history, -1)
        out[label] = median_pair([await time_run(agent, turns, history, k) for k in range(repeats)])
    return out


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    grid = {k: GRID[k] for k in args.grid.split(",")}
    result: dict[str, Any] = {"framework": "pydantic-ai", "version": version("pydantic-ai-slim")}
    if "inproc" in args.variants:
        result["inproc"] = await measure(build_agent(FunctionModel(fake)), args.repeats, grid)
    if "loopback" in args.variants and args.base_url:
        provider = OpenAIProvider(base_url=args.base_url, api_key="bench")
        agent = build_agent(OpenAIChatModel("bench", provider=provider))
        result["loopback"] = await measure(agent, args.repeats, grid)
    if "responses" in args.variants and args.responses_url:
        provider = OpenAIProvider(base_url=args.responses_url, api_key="bench")
        agent = build_agent(OpenAIResponsesModel("bench", provider=provider))
        result["responses"] = await measure(agent, args.repeats, grid)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description="pydantic-ai overhead")
    parser.add_argument("--base-url", default="")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--grid", default=",".join(GRID))
    parser.add_argument("--variants", default="inproc,loopback")
    parser.add_argument("--responses-url", default="")
    parser.add_argument("--delegation", type=int, default=0, help="ignored (no as_tool peer)")
    emit_json(asyncio.run(main_async(parser.parse_args())))


if __name__ == "__main__":
    main()
