"""Sub-agent delegation overhead, Retinue side (issue 7, figure 2).

One parent delegates to one sub-agent ``turns`` times through the ``SubAgent`` tool, then
answers: interactively (one session, its history growing turn by turn) or one-shot (a fresh
conversation each time). Both models answer at once (in process), so the time is the
runtime's. The OpenAI Agents SDK's ``as_tool`` counterpart is in ``peers/agents_bench.py``.

Run alone: ``uv run python benchmarks/delegation.py [--turns 20] [--repeats 5]``.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _common import FINAL, emit_json, median

from retinue.engine import RunConfig, run
from retinue.llm.base import ToolSpec
from retinue.messages import Message, SystemMessage, ToolResultMessage, UserMessage
from retinue.subagents import Role, RoleCatalog, SubAgentManager, subagent_tools
from retinue.testing import ScriptedModel, call_tool
from retinue.tools import ToolContext, ToolRegistry


def parent_responder(turns: int, interactive: bool) -> Any:
    def answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
        done = 0
        for m in reversed(messages):
            if isinstance(m, UserMessage):
                break
            done += isinstance(m, ToolResultMessage)
        # a new task each time: the same task again and again is a loop that the fan-out
        # loop detector (retinue.subagents.caps) stops
        args = {"task": f"step {done + 1}", "role": "worker", "interactive": interactive}
        return call_tool("SubAgent", args) if done < turns else FINAL

    return answer


def build(turns: int, interactive: bool) -> tuple[SubAgentManager, ScriptedModel]:
    worker = ScriptedModel(responder=lambda m, t: "sub-agent reply", record=False)
    manager = SubAgentManager(
        RoleCatalog.of(Role("worker", "does the work", "You are the worker.")),
        ToolRegistry(),
        default_model=worker,
    )
    parent = ScriptedModel(responder=parent_responder(turns, interactive), record=False)
    return manager, parent


async def one_run(turns: int, interactive: bool) -> float:
    """Per-delegation ms of one parent run (its sessions cleaned up at the end)."""
    manager, parent = build(turns, interactive)
    ctx = ToolContext("main", Path.cwd(), Path.cwd(), call_chain=("main",), manager=manager)
    tools = ToolRegistry(subagent_tools())
    config = RunConfig(
        parent,
        [SystemMessage("You delegate."), UserMessage("delegate please")],
        tools,
        ctx,
        max_iterations=turns + 5,
    )
    started = time.perf_counter()
    async with manager.owner("main"):
        out = await run(config)
    elapsed = (time.perf_counter() - started) * 1000
    errors = [m for m in out.messages if isinstance(m, ToolResultMessage) and m.is_error]
    if out.content != FINAL or errors:
        raise RuntimeError(f"delegation run went wrong: {out.content!r} {errors[:1]}")
    return elapsed / turns


async def measure(turns: int, repeats: int) -> dict[str, float]:
    out = {}
    for name, interactive in (("interactive", True), ("one_shot", False)):
        await one_run(turns, interactive)
        out[name] = median([await one_run(turns, interactive) for _ in range(repeats)])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description="Retinue sub-agent delegation overhead")
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    result = asyncio.run(measure(args.turns, args.repeats))
    emit_json({"framework": "retinue", "turns": args.turns, **result})


if __name__ == "__main__":
    main()
