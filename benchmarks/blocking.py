"""A slow synchronous tool must not stall every session (issue 19, figure 2).

``sessions`` concurrent runs each call one plain ``def`` tool that blocks for ``block_ms``
(``time.sleep``, as a blocking library call would), then answer. Plain tools run in a bounded
thread pool (``retinue.tools._threads.SYNC_TOOL_THREADS`` threads), so the wall time should be
close to ``ceil(sessions / threads) * block_ms``, not ``sessions * block_ms`` (what running the
tool inline on the event loop costs). Meanwhile a lag probe sleeps ``probe_ms`` in a loop on the
same event loop and records how late each wake-up is: the longest is the worst stall any other
session or HTTP request of the process would have seen.

Run alone: ``uv run python benchmarks/blocking.py [--sessions 100] [--block-ms 50]``.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import time
from pathlib import Path
from typing import Any

from _common import emit_json, load_average

from retinue.engine import RunConfig, run
from retinue.messages import SystemMessage, UserMessage
from retinue.testing import ScriptedModel, call_tool
from retinue.tools import ToolContext, ToolRegistry, tool
from retinue.tools._threads import SYNC_TOOL_THREADS


def blocking_tool(block_s: float) -> Any:
    @tool("wait")
    def wait() -> str:
        """Block this thread for a while (a slow synchronous library call)."""
        time.sleep(block_s)
        return "waited"

    return wait


async def probe(stop: asyncio.Event, every_s: float, lags: list[float]) -> None:
    """Sleep ``every_s`` again and again; record how late each wake-up came (seconds)."""
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        due = loop.time() + every_s
        await asyncio.sleep(every_s)
        lags.append(loop.time() - due)


async def measure(sessions: int, block_ms: float, probe_ms: float = 5.0) -> dict[str, Any]:
    block_s = block_ms / 1000
    registry = ToolRegistry([blocking_tool(block_s)])
    ctx = ToolContext("bench", Path.cwd(), Path.cwd())

    def config() -> RunConfig:
        model = ScriptedModel([call_tool("wait", {}), "done"], record=False)
        return RunConfig(model, [SystemMessage("sys"), UserMessage("go")], registry, ctx)

    configs = [config() for _ in range(sessions)]  # built before the clock starts
    await run(config())  # warm-up: the pool's threads exist before timing
    stop, lags = asyncio.Event(), list[float]()
    prober = asyncio.create_task(probe(stop, probe_ms / 1000, lags))
    await asyncio.sleep(probe_ms / 1000)
    started = time.perf_counter()
    outs = await asyncio.gather(*(run(c) for c in configs))
    wall = time.perf_counter() - started
    stop.set()
    await prober
    if any(o.content != "done" for o in outs):
        raise RuntimeError("a blocking-tool run went wrong")
    ideal = math.ceil(sessions / SYNC_TOOL_THREADS) * block_s
    return {
        "sessions": sessions,
        "block_ms": block_ms,
        "threads": SYNC_TOOL_THREADS,
        "wall_s": wall,
        "ideal_wall_s": ideal,
        "inline_wall_s": sessions * block_s,
        "wall_over_ideal": wall / ideal,
        "probe_ms": probe_ms,
        "probes": len(lags),
        "max_lag_ms": max(lags, default=0.0) * 1000,
        "load": load_average(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="Sessions calling a blocking sync tool")
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--block-ms", type=float, default=50.0)
    args = parser.parse_args()
    emit_json(asyncio.run(measure(args.sessions, args.block_ms)))


if __name__ == "__main__":
    main()
