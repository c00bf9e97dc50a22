"""LangGraph side of the overhead benchmark (``langgraph.prebuilt.create_react_agent``).

Runs in the peer environment (``benchmarks/.venv-peers``). LangChain's fake chat models do not
bind tools, so the in-process fake is a minimal ``BaseChatModel`` subclass (``_generate`` plus a
``bind_tools`` that keeps it), the documented way to write a custom chat model; over loopback
the agent uses ``ChatOpenAI`` against the runner's server. Prints one JSON line.
"""
# pyright: reportMissingImports=false, reportAttributeAccessIssue=false

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
import warnings
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
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

warnings.filterwarnings("ignore")
from langgraph.prebuilt import create_react_agent  # noqa: E402

_ids = itertools.count(1)


@tool(TOOL_NAME)
def noop() -> str:
    """Do nothing."""
    return "ok"


class FakeChat(BaseChatModel):
    """Stateless like the loopback server: count tool messages since the last human one."""

    @property
    def _llm_type(self) -> str:
        return "bench-fake"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        done = 0
        for m in reversed(messages):
            if isinstance(m, HumanMessage):
                if done < wanted_turns(str(m.content)) - 1:
                    call = {"name": TOOL_NAME, "args": {}, "id": f"call_{next(_ids)}"}
                    msg = AIMessage(content="", tool_calls=[call], usage_metadata=usage())
                else:
                    msg = AIMessage(content=FINAL, usage_metadata=usage())
                return ChatResult(generations=[ChatGeneration(message=msg)])
            if isinstance(m, ToolMessage):
                done += 1
        msg = AIMessage(content=FINAL, usage_metadata=usage())
        return ChatResult(generations=[ChatGeneration(message=msg)])

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        """Async, as Retinue's fake (the default would hop to a worker thread)."""
        return self._generate(messages, stop, run_manager, **kwargs)


def usage() -> Any:
    """The fixed usage figure every framework's fake reports (as Retinue's does)."""
    return {"input_tokens": 100, "output_tokens": 10, "total_tokens": 110}


def seeded(history: int, task: str) -> list[BaseMessage]:
    out: list[BaseMessage] = [
        HumanMessage(text) if role == "user" else AIMessage(text)
        for role, text in history_texts(history)
    ]
    out.append(HumanMessage(task))
    return out


async def time_run(agent: Any, turns: int, history: int, k: int) -> tuple[float, float]:
    """Per-turn (wall, CPU) milliseconds of one run; the seeded history is built beforehand."""
    state_in = {"messages": seeded(history, task_text(turns, history, k))}
    config = {"recursion_limit": 2 * turns + 10}
    state, wall, cpu = await timed(agent.ainvoke(state_in, config=config))
    last = state["messages"][-1]
    if last.text != FINAL:  # (the Responses API's content is a list of blocks: .text joins them)
        raise RuntimeError(f"langgraph run went wrong: {last.content!r}")
    return wall / turns, cpu / turns


async def measure(
    agent: Any, repeats: int, grid: dict[str, tuple[int, int]]
) -> dict[str, dict[str, float]]:
    out = {}
    for label, (turns, history) in grid.items():
        await time_run(agent, turns, history, -1)
        out[label] = median_pair([await time_run(agent, turns, history, k) for k in range(repeats)])
    return out


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    grid = {k: GRID[k] for k in args.grid.split(",")}
    result: dict[str, Any] = {"framework": "langgraph", "version": version("langgraph")}
    if "inproc" in args.variants:
        agent = create_react_agent(FakeChat(), [noop], prompt=SYSTEM)
        result["inproc"] = await measure(agent, args.repeats, grid)
    if "loopback" in args.variants and args.base_url:
        chat = ChatOpenAI(model="bench", base_url=args.base_url, api_key="bench")  # type: ignore[arg-type]
        agent = create_react_agent(chat, [noop], prompt=SYSTEM)
        result["loopback"] = await measure(agent, args.repeats, grid)
    if "responses" in args.variants and args.responses_url:
        chat = ChatOpenAI(
            model="bench", base_url=args.responses_url, api_key="bench", use_responses_api=True
        )  # type: ignore[arg-type]
        agent = create_react_agent(chat, [noop], prompt=SYSTEM)
        result["responses"] = await measure(agent, args.repeats, grid)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description="LangGraph overhead")
    parser.add_argument("--base-url", default="")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--grid", default=",".join(GRID))
    parser.add_argument("--variants", default="inproc,loopback")
    parser.add_argument("--responses-url", default="")
    parser.add_argument("--delegation", type=int, default=0, help="ignored")
    emit_json(asyncio.run(main_async(parser.parse_args())))


if __name__ == "__main__":
    main()
