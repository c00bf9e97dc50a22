"""The plain-tool thread pool against asyncio's ``to_thread`` and anyio's (issue 42, item 4).

Three ways to run a plain ``def`` tool off the event loop, each in a fresh process per round
(the order rotates each round; ratios are taken within a round, against ``pool``):

- ``pool``: Retinue's own (``retinue.tools._threads.run_sync``: daemon threads, a quick tool
  waited for on the loop's thread);
- ``to_thread``: ``asyncio.to_thread`` under an ``asyncio.Semaphore`` of the same size (as
  Starlette's ``run_in_threadpool`` bounds it), a ``StopIteration`` turned into
  ``RuntimeError`` first (an asyncio future refuses it: the caller would hang);
- ``anyio``: ``anyio.to_thread.run_sync`` with a ``CapacityLimiter`` of the same size and
  ``abandon_on_cancel=True`` (as pydantic-ai runs a plain tool).

Each child process patches ``retinue.tools.base.run_sync`` and measures: ``blocking.py``'s
figure (100 runs each calling one 50 ms tool: wall time, the longest loop stall), the
in-process overhead per turn of ``overhead.py`` (1a: 100 and 10 turns), 5,000 sequential
calls of a no-op tool (CPU and wall per call), and over loopback the 100-turn run alternated
with the bare ``http.client`` floor (1b's floor ratio). Another child per variant starts a
run whose tool never returns, cancels it and returns from its main coroutine: the seconds
until the process is gone (``--exit-wait`` at most, then it is killed).

    uv run python benchmarks/swaps_threads.py [--rounds 5] [--repeats 3]

Prints one JSON line and writes ``benchmarks/results/swaps_threads.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import GRID, HERE, emit_json, load_average, median, write_result

VARIANTS = ("pool", "to_thread", "anyio")
METRICS = (
    "blocking_wall_s",
    "blocking_max_lag_ms",
    "inproc_t100_wall_ms",
    "inproc_t100_cpu_ms",
    "inproc_t10_wall_ms",
    "inproc_t10_cpu_ms",
    "call_wall_us",
    "call_cpu_us",
    "floor_t100_wall",
    "floor_t100_cpu",
)


def install(variant: str) -> None:
    """Make plain tools run through ``variant`` in this process."""
    import retinue.tools.base as base
    from retinue.tools._threads import SYNC_TOOL_THREADS

    if variant == "pool":
        return
    if variant == "to_thread":
        semaphore = asyncio.Semaphore(SYNC_TOOL_THREADS)  # (one event loop per child)

        async def via_to_thread(fn: Callable[..., Any], kwargs: dict[str, Any], _pace: Any) -> Any:
            async with semaphore:
                return await asyncio.to_thread(_no_stop_iteration, fn, kwargs)

        base.run_sync = via_to_thread  # type: ignore[assignment]
    elif variant == "anyio":
        import anyio.to_thread

        limiter = anyio.CapacityLimiter(SYNC_TOOL_THREADS)

        async def via_anyio(fn: Callable[..., Any], kwargs: dict[str, Any], _pace: Any) -> Any:
            return await anyio.to_thread.run_sync(
                lambda: fn(**kwargs), abandon_on_cancel=True, limiter=limiter
            )

        base.run_sync = via_anyio  # type: ignore[assignment]
    else:
        raise SystemExit(f"unknown variant {variant!r}")


def _no_stop_iteration(fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    try:
        return fn(**kwargs)
    except StopIteration as exc:
        raise RuntimeError("the tool raised StopIteration") from exc


async def sequential_calls(n: int) -> tuple[float, float]:
    """Wall and CPU microseconds per call of a no-op plain tool, ``n`` calls in a row."""
    from retinue.tools import ToolContext, tool

    @tool
    def noop() -> str:
        return "ok"

    ctx = ToolContext("bench", Path.cwd(), Path.cwd())
    for _ in range(50):  # warm-up: threads started, the tool's pace known
        await noop.invoke(ctx, "{}")
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(n):
        await noop.invoke(ctx, "{}")
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return wall * 1e6 / n, cpu * 1e6 / n


async def child(
    variant: str, base_url: str, repeats: int, pairs: int, calls: int
) -> dict[str, Any]:
    install(variant)
    import blocking
    import overhead

    from retinue.llm.openai import OpenAIModel

    out: dict[str, Any] = {"variant": variant}
    stall = await blocking.measure(100, 50.0)
    out["blocking_wall_s"], out["blocking_max_lag_ms"] = stall["wall_s"], stall["max_lag_ms"]
    grid = {k: GRID[k] for k in ("t100", "t10")}
    inproc = await overhead.measure(overhead.inproc_model(), repeats, grid)
    for label, pair in inproc.items():
        out[f"inproc_{label}_wall_ms"], out[f"inproc_{label}_cpu_ms"] = pair["wall"], pair["cpu"]
    out["call_wall_us"], out["call_cpu_us"] = await sequential_calls(calls)
    model = OpenAIModel("bench", base_url=base_url, api_key="bench")
    _, _, ratios = await overhead.paired(model, base_url, pairs, {"t100": GRID["t100"]})
    out["floor_t100_wall"] = median(ratios["t100"]["wall"])
    out["floor_t100_cpu"] = median(ratios["t100"]["cpu"])
    return out


async def stuck(variant: str) -> None:
    """A run whose plain tool never returns, cancelled once the tool has started."""
    install(variant)
    from retinue.engine import RunConfig, run
    from retinue.messages import SystemMessage, UserMessage
    from retinue.testing import ScriptedModel, call_tool
    from retinue.tools import ToolContext, ToolRegistry, tool

    loop = asyncio.get_running_loop()
    entered = asyncio.Event()

    @tool("hang")
    def hang() -> str:
        """Never return (a library call stuck on a dead peer)."""
        loop.call_soon_threadsafe(entered.set)
        threading.Event().wait()
        return "never"

    model = ScriptedModel([call_tool("hang", {}), "done"], record=False)
    ctx = ToolContext("bench", Path.cwd(), Path.cwd())
    config = RunConfig(model, [SystemMessage("sys"), UserMessage("go")], ToolRegistry([hang]), ctx)
    task = asyncio.create_task(run(config))
    await entered.wait()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    print("cancelled", flush=True)


def exit_seconds(variant: str, wait_s: float) -> float | None:
    """Seconds from the run's cancel to the process being gone; ``None``: still there after
    ``wait_s`` (then killed)."""
    argv = [sys.executable, __file__, "--stuck", variant]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, cwd=HERE)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    started = time.perf_counter()
    if line.strip() != "cancelled":
        proc.kill()
        raise RuntimeError(f"{variant}: the stuck run did not get to its cancel: {line!r}")
    try:
        proc.wait(wait_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return None
    return time.perf_counter() - started


def run_child(variant: str, args: argparse.Namespace, base_url: str) -> dict[str, Any]:
    argv = [sys.executable, __file__, "--child", variant, "--base-url", base_url]
    argv += ["--repeats", str(args.repeats), "--pairs", str(args.pairs), "--calls", str(args.calls)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False, cwd=HERE)
    if done.returncode != 0:
        raise RuntimeError(f"{variant} failed: {done.stderr.strip()[-800:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def summarise(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Per variant and metric: the median over rounds, and the median (min-max) over rounds
    of the ratio to ``pool`` in the same round."""
    out: dict[str, Any] = {}
    for variant in VARIANTS:
        entry: dict[str, Any] = {}
        for metric in METRICS:
            values = [r["runs"][variant][metric] for r in rounds]
            ratios = [r["runs"][variant][metric] / r["runs"]["pool"][metric] for r in rounds]
            entry[metric] = {
                "median": median(values),
                "ratio_to_pool": median(ratios),
                "ratio_range": [min(ratios), max(ratios)],
            }
        exits = [r["exit_s"][variant] for r in rounds]
        entry["exit_s"] = exits
        out[variant] = entry
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description="Plain-tool thread pool: Retinue's vs libraries")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--exit-wait", type=float, default=10.0)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)
    parser.add_argument("--stuck", default="", help=argparse.SUPPRESS)
    parser.add_argument("--base-url", default="", help=argparse.SUPPRESS)
    parser.add_argument("--out", default="swaps_threads", help="results/<OUT>.json")
    args = parser.parse_args()
    if args.stuck:
        asyncio.run(stuck(args.stuck))
        return
    if args.child:
        result = asyncio.run(child(args.child, args.base_url, args.repeats, args.pairs, args.calls))
        emit_json(result)
        return
    from overhead import start_server

    variants = args.variants.split(",")
    server = start_server()
    rounds: list[dict[str, Any]] = []
    try:
        for r in range(args.rounds):
            order = variants[r % len(variants) :] + variants[: r % len(variants)]
            entry: dict[str, Any] = {"order": order, "load": load_average(), "runs": {}}
            entry["exit_s"] = {v: exit_seconds(v, args.exit_wait) for v in order}
            for variant in order:
                entry["runs"][variant] = run_child(variant, args, server.base_url)
                server.requests.clear()
            entry["load_after"] = load_average()
            rounds.append(entry)
            print(f"round {r + 1}/{args.rounds} done, load {entry['load']}", file=sys.stderr)
    finally:
        server.close()
    result = {
        "rounds": rounds,
        "summary": summarise(rounds) if set(variants) == set(VARIANTS) else {},
        "params": vars(args),
        "python": sys.version.split()[0],
    }
    write_result(args.out, result)
    emit_json(result["summary"])


if __name__ == "__main__":
    main()
