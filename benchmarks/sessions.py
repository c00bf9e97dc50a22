"""Interactive sessions at scale, Retinue only (issue 7, figure 3).

``throughput``: ``n`` concurrent interactive sessions (one parent, one instance of the role
each) run ``turns`` turns each against a model with ``delay`` seconds of simulated latency
(an ``asyncio.sleep`` in :class:`ScriptedModel`): sustained model calls per second, and peak
RSS growth (run one scale per process, as the runner does, so the high-water mark is this
scale's), and the CPU time per model call (what grows with the number of sessions shows
here: the simulated latency costs no CPU). ``idle_memory``: ``n`` sessions with a
``history_turns``-turn history sit idle; tracemalloc says what they hold per session,
compared to the UTF-8 size of their messages (:func:`message_text_size`) and to the
history's own objects (:func:`footprint`: the message list, the message records, their
strings and tool calls); the rest is what the session itself costs. After unloading them
all (``cleanup``), what is still held beyond the baseline (a leak would show here).

``census`` (a diagnostic): the objects the cyclic collector tracks, by type, per turn in
flight (what thousands of concurrent turns make it walk and promote) and per idle session.

Run alone: ``uv run python benchmarks/sessions.py --scale 1000``, ``--idle 1000`` or
``--census 2000``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import dataclasses
import gc
import resource
import sys
import time
import tracemalloc
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _common import emit_json

from retinue.engine.collector import tune_for_serving
from retinue.llm.base import ModelResponse, ToolSpec
from retinue.messages import AssistantMessage, Message, Usage, message_text_size
from retinue.subagents import FanOutLimits, Role, RoleCatalog, SubAgentManager
from retinue.testing import ScriptedModel
from retinue.tools import ToolContext, ToolRegistry

PARENT = "main"
ROLE = "worker"
TASK_PAD = "please look at the next part of the module and tell me what you think. " * 4
USAGE = Usage(1000, 150, 0, 1)
REPLY_PAD = "I read it; the function is fine but the error path needs a clearer message. " * 8


def reply(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
    """A fresh ~600-byte string per answer (shared strings would flatter the memory figure),
    with its usage figure, as a provider reports it (no token estimate over the history)."""
    return ModelResponse(AssistantMessage(f"reply {len(messages)}: {REPLY_PAD}"), USAGE, "stop")


# thousands of sessions under one parent is the point here: the fan-out caps (20 open at once
# by default, retinue.subagents.caps) are off
NO_CAPS = FanOutLimits(per_run=0, per_conversation=0, concurrent=0)


def build(delay: float) -> tuple[SubAgentManager, ScriptedModel, ToolContext]:
    model = ScriptedModel(responder=reply, delay=delay, record=False)
    manager = SubAgentManager(
        RoleCatalog.of(Role(ROLE, "answers questions", "You are the worker sub-agent.")),
        ToolRegistry(),
        default_model=model,
        limits=NO_CAPS,
    )
    ctx = ToolContext(PARENT, Path.cwd(), Path.cwd(), call_chain=(PARENT,), manager=manager)
    return manager, model, ctx


async def drive(manager: SubAgentManager, ctx: ToolContext, n: int, turns: int) -> None:
    async def one(i: int) -> None:
        for t in range(turns):
            await manager.interactive_subagent(ctx, f"task {t} of {i}: {TASK_PAD}", ROLE, f"s{i}")

    await asyncio.gather(*(one(i) for i in range(n)))


def rss_kib() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() // 1024


def peak_rss_kib() -> int:
    """This process's RSS high-water mark (``VmHWM``; ``ru_maxrss`` survives exec)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


COLLECTORS = ("default", "serve", "off")


async def throughput(
    n: int, turns: int = 5, delay: float = 0.02, *, collector: str = "default"
) -> dict[str, Any]:
    """Model calls per second over ``n`` concurrent sessions of ``turns`` turns.

    ``collector``: ``default`` keeps Python's cyclic garbage collector settings (a program
    that embeds the library); ``serve`` sets them as ``retinue serve`` does
    (:func:`~retinue.engine.collector.tune_for_serving`); ``off`` turns the collector off
    while they run (a diagnostic: what is left is the runtime's own cost per call).
    """
    manager, model, ctx = build(delay)
    gc.collect()
    base = rss_kib()
    full_before = gc.get_stats()[2]["collections"]
    thresholds = gc.get_threshold()
    if collector == "off":
        gc.disable()
    elif collector == "serve":
        tune_for_serving()
    started, cpu = time.perf_counter(), time.process_time()
    try:
        await drive(manager, ctx, n, turns)
    finally:
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        gc.enable()
        gc.set_threshold(*thresholds)
    full = gc.get_stats()[2]["collections"] - full_before
    live = len(manager.sessions(PARENT))
    await manager.cleanup(PARENT)
    ideal = n * turns / (turns * delay) if delay else float("inf")
    return {
        "sessions": n,
        "turns": turns,
        "delay_ms": delay * 1000,
        "model_calls": model.call_count,
        "wall_s": wall,
        "calls_per_s": model.call_count / wall,
        "cpu_s": cpu,
        "cpu_us_per_call": cpu * 1e6 / max(1, model.call_count),
        "collector": collector != "off",
        "collector_mode": collector,
        "full_collections": full,
        "ideal_calls_per_s": ideal,
        "live_sessions_before_cleanup": live,
        "rss_growth_peak_mib": max(0, peak_rss_kib() - base) / 1024,
    }


def footprint(messages: list[Message]) -> int:
    """Bytes of a history itself: the list, each record, its strings, its tool calls."""
    seen: set[int] = set()

    def size(obj: object) -> int:
        if id(obj) in seen:
            return 0
        seen.add(id(obj))
        total = sys.getsizeof(obj)
        if isinstance(obj, tuple):
            total += sum(size(x) for x in obj)  # pyright: ignore[reportUnknownVariableType]
        elif dataclasses.is_dataclass(obj):
            for f in dataclasses.fields(obj):
                value = getattr(obj, f.name)
                if (f.init and isinstance(value, str | tuple)) or dataclasses.is_dataclass(value):
                    total += size(value)
        return total

    return sys.getsizeof(messages) + sum(size(m) for m in messages)


async def settle() -> None:
    """Let finished tasks' callbacks run, then collect, so only live objects are counted."""
    for _ in range(3):
        await asyncio.sleep(0)
    gc.collect()


async def idle_memory(n: int, history_turns: int = 20) -> dict[str, Any]:
    """What ``n`` idle sessions of ``history_turns`` turns hold, and what is left after unloading.

    Two rounds of build + unload: what round 1 leaves is the containers' high-water tables
    (the session dict, asyncio's task set), reused later; a leak is what round 2 adds on top.
    """
    manager, _, ctx = build(0.0)
    await drive(manager, ctx, 1, 1)  # warm caches (pydantic, asyncio) before the baseline
    await manager.cleanup(PARENT)
    await settle()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    started = time.perf_counter()
    await drive(manager, ctx, n, history_turns)
    build_s = time.perf_counter() - started
    await settle()
    held = tracemalloc.get_traced_memory()[0] - base
    infos = manager.sessions(PARENT)
    text = sum(message_text_size(manager.history(s.id)) for s in infos)
    records = sum(footprint(held.session.messages) for held in manager.registry.held_by(PARENT))
    messages = sum(s.messages for s in infos)
    peak = tracemalloc.get_traced_memory()[1] - base
    count = max(1, len(infos))
    del infos
    await manager.cleanup(PARENT)
    await settle()
    left1 = tracemalloc.get_traced_memory()[0] - base
    await drive(manager, ctx, n, history_turns)
    await manager.cleanup(PARENT)
    await settle()
    left2 = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    return {
        "sessions": count,
        "history_turns": history_turns,
        "messages_per_session": messages / count,
        "build_s": build_s,
        "bytes_per_session": held / count,
        "message_bytes_per_session": text / count,
        "ratio": held / max(1, text),
        "message_objects_per_session": records / count,
        "beyond_messages_per_session": (held - records) / count,
        "left_after_unload_bytes": left1,
        "leak_second_round_bytes": left2 - left1,
        "leak_per_session_bytes": (left2 - left1) / count,
        "traced_peak_mib": peak / 2**20,
    }


def tracked() -> collections.Counter[str]:
    """Objects the cyclic collector tracks, by type name, after a full collection."""
    gc.collect()
    return collections.Counter(type(o).__name__ for o in gc.get_objects())


async def census(n: int) -> dict[str, Any]:
    """Tracked objects per turn in flight (``n`` turns waiting on the model; the turn's user
    message and the benchmark's own driver task included) and per idle session (one turn
    of history), by type."""
    manager, _, ctx = build(0.5)
    await drive(manager, ctx, n, 1)  # the sessions exist, idle
    await settle()
    before = tracked()
    running = asyncio.ensure_future(drive(manager, ctx, n, 1))
    await asyncio.sleep(0.2)  # every turn is in its model call now
    busy = tracked()
    await running
    await manager.cleanup(PARENT)
    await settle()
    empty = tracked()

    def per(more: collections.Counter[str], less: collections.Counter[str]) -> dict[str, float]:
        diff = {k: (more[k] - less[k]) / n for k in more.keys() | less.keys()}
        return dict(
            sorted(((k, v) for k, v in diff.items() if abs(v) >= 0.5), key=lambda kv: -kv[1])
        )

    in_flight, held = per(busy, before), per(before, empty)
    return {
        "sessions": n,
        "in_flight_per_turn": sum(in_flight.values()),
        "in_flight_by_type": in_flight,
        "per_idle_session": sum(held.values()),
        "per_idle_session_by_type": held,
    }


def repeated(n: int, turns: int, delay: float, collector: str, repeats: int) -> dict[str, Any]:
    """:func:`throughput` ``repeats`` times in this process (a fresh event loop each): the
    run with the median CPU per call, with every run's figure; the peak RSS growth is the
    first run's (later ones start from the heap the first left)."""
    runs = [asyncio.run(throughput(n, turns, delay, collector=collector)) for _ in range(repeats)]
    middle = dict(sorted(runs, key=lambda r: r["cpu_us_per_call"])[len(runs) // 2])
    middle["rss_growth_peak_mib"] = runs[0]["rss_growth_peak_mib"]
    middle["repeats"] = repeats
    middle["cpu_us_per_call_runs"] = [r["cpu_us_per_call"] for r in runs]
    return middle


def main() -> None:
    parser = argparse.ArgumentParser(description="Retinue interactive sessions at scale")
    parser.add_argument("--scale", type=int, default=0, help="sessions for the throughput run")
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--delay", type=float, default=0.02)
    parser.add_argument(
        "--collector",
        choices=COLLECTORS,
        default="default",
        help="Python's settings, retinue serve's, or the cyclic GC off (diagnostic)",
    )
    parser.add_argument("--idle", type=int, default=0, help="sessions for the idle-memory run")
    parser.add_argument("--history-turns", type=int, default=20)
    parser.add_argument("--census", type=int, default=0, help="sessions for the object census")
    parser.add_argument("--repeats", type=int, default=1, help="throughput runs (the median)")
    args = parser.parse_args()
    out: dict[str, Any] = {}
    if args.scale:
        out["throughput"] = repeated(
            args.scale, args.turns, args.delay, args.collector, max(1, args.repeats)
        )
    if args.idle:
        out["idle"] = asyncio.run(idle_memory(args.idle, args.history_turns))
    if args.census:
        out["census"] = asyncio.run(census(args.census))
    emit_json(out)


if __name__ == "__main__":
    main()
