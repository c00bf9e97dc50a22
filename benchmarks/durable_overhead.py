"""Durable sessions (issue 30): what they add to a session's step, on SQLite and PostgreSQL,
and that they add nothing when off.

Run: ``uv run python benchmarks/durable_overhead.py`` (PostgreSQL binaries must be installed,
as for the tests; ``--no-postgres`` skips it). Writes ``benchmarks/results/durable_overhead.json``.

A session of ``--steps`` steps: a scripted model (no latency) asks for one cheap tool call
per step (``Noop``), then answers. It runs as a real :class:`~retinue.engine.session.Session`
turn, either without a recorder (durable sessions **off**, the default: no step is recorded,
nothing is written) or with a :class:`~retinue.durable.JournalRecorder` on the store's
journal (**on**: a write at the turn's start, after every model reply and every step's tool
results, and at the turn's end: ``2 x steps + 3`` writes). Each round runs one session of
each mode, in alternating order (off first in even rounds), on the same store; the figures
are per step: wall time and this process's CPU time (every thread: SQLite writes run on a
worker thread; the PostgreSQL server's own CPU is not counted). Reported: the median over
the rounds of each mode, and the median of the ratio on/off *within* a round (the two runs
of a round are seconds apart, so the machine's load is about the same for both).

**Zero when off.** The off mode is also run against itself (``off-vs-off``: two off
sessions per round, the same alternation): its ratio is the noise floor; and an off
session is checked to record no step (``Session.records``) and to leave no record in the
journal.

SQLite: the memory database in a temporary folder (WAL, ``synchronous=NORMAL``).
PostgreSQL: a throwaway server started here (``fsync=off``, as in the tests).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from retinue.durable import JournalRecorder
from retinue.engine import RunConfig
from retinue.engine.session import Session
from retinue.llm.base import ToolSpec
from retinue.memory import MemoryBackend, PostgresMemory, open_store
from retinue.messages import Message, ToolResultMessage
from retinue.testing import ScriptedModel, call_tool
from retinue.tools import ToolContext, ToolRegistry, tool

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "durable_overhead.json"
TENANT = "bench"


@tool("Noop")
async def noop() -> str:
    """Do nothing (the cheapest tool call)."""
    return "ok"


def _model(steps: int) -> ScriptedModel:
    """A model that asks for ``Noop`` ``steps`` times, then answers."""

    def respond(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
        done = sum(isinstance(m, ToolResultMessage) for m in messages)
        return call_tool("Noop", id=f"c{done}") if done < steps else "done"

    return ScriptedModel(name="scripted:bench", responder=respond, record=False)


def _session(sid: str, steps: int, workspace: Path) -> Session:
    ctx = ToolContext(sid, workspace, workspace, role="main", tenant=TENANT)
    # (the same no-op call every step, by design: no repeat limit)
    config = RunConfig(_model(steps), [], ToolRegistry([noop]), ctx, max_iterations=steps + 5,
                       repeat_limit=None)  # fmt: skip
    return Session(sid, config)


async def one_session(
    store: MemoryBackend | None, sid: str, steps: int, workspace: Path
) -> tuple[float, float]:
    """Run one session of ``steps`` steps (durable when ``store`` is given): its wall and CPU
    seconds per step."""
    session = _session(sid, steps, workspace)
    recorder = None
    if store is not None:
        recorder = JournalRecorder(store.journal, TENANT, sid, root=sid)
        session.set_recorder(recorder)
    wall, cpu = time.perf_counter(), time.process_time()
    out = await session.send("go")
    if recorder is not None:
        await recorder.settled()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if out.content != "done":
        raise RuntimeError(f"the session did not finish: {out.content!r}")
    return wall / steps, cpu / steps


async def check_off(store: MemoryBackend, workspace: Path) -> dict[str, Any]:
    """An off session has no step hook and records nothing."""
    before = len(await store.journal.records(TENANT))
    session = _session("check-off", 3, workspace)
    hook = session.records  # (whether the run loop hands it each step boundary)
    await session.send("go")
    after = len(await store.journal.records(TENANT))
    return {"on_step_hook": hook, "records_written": after - before}


async def measure(store: MemoryBackend, steps: int, rounds: int, workspace: Path) -> dict[str, Any]:
    """``rounds`` alternating rounds of off/on and of off/off (after one warm-up of each)."""
    pairs: dict[str, tuple[MemoryBackend | None, MemoryBackend | None]] = {
        "on-vs-off": (None, store),
        "off-vs-off": (None, None),
    }
    out: dict[str, Any] = {}
    for name, (first, second) in pairs.items():
        await one_session(first, f"warm-{name}-a", steps, workspace)
        await one_session(second, f"warm-{name}-b", steps, workspace)
        runs: dict[str, list[tuple[float, float]]] = {"a": [], "b": []}
        for r in range(rounds):
            order = (("a", first), ("b", second)) if r % 2 == 0 else (("b", second), ("a", first))
            for label, mode in order:
                runs[label].append(await one_session(mode, f"{name}-{r}-{label}", steps, workspace))
        out[name] = _summary(runs["a"], runs["b"])
    return out


def _summary(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> dict[str, Any]:
    """Medians per step (ms) of the two modes, their difference, and the in-round ratios."""

    def med(xs: list[float]) -> float:
        return round(statistics.median(xs) * 1000, 4)

    result: dict[str, Any] = {}
    for i, what in enumerate(("wall", "cpu")):
        first, second = [x[i] for x in a], [x[i] for x in b]
        ratios = [y / x for x, y in zip(first, second, strict=True) if x > 0]
        result[what] = {
            "first_ms_per_step": med(first),
            "second_ms_per_step": med(second),
            "added_ms_per_step": round(med(second) - med(first), 4),
            "ratio_in_round_median": round(statistics.median(ratios), 3),
            "ratio_in_round_min_max": [round(min(ratios), 3), round(max(ratios), 3)],
        }
    return result


async def on_store(
    name: str, url: str | None, steps: Sequence[int], rounds: int, folder: Path
) -> dict[str, Any]:
    store = open_store(folder / name, url)
    try:
        if isinstance(store, PostgresMemory):
            await store.pool()
        result: dict[str, Any] = {"off_check": await check_off(store, folder)}
        for n in steps:
            result[f"{n}_steps"] = await measure(store, n, rounds, folder)
            print(name, n, json.dumps(result[f"{n}_steps"]), file=sys.stderr)
        return result
    finally:
        if isinstance(store, PostgresMemory):
            await store.aclose()
        else:
            store.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Durable sessions: the cost per step")
    parser.add_argument("--steps", type=int, nargs="+", default=[20, 100])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    load = list(os.getloadavg())
    results: dict[str, Any] = {
        "steps": args.steps,
        "rounds": args.rounds,
        "load_average_before": [round(x, 2) for x in load],
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }
    with tempfile.TemporaryDirectory(prefix="durable-overhead-") as tmp:
        folder = Path(tmp)
        results["sqlite"] = asyncio.run(on_store("sqlite", None, args.steps, args.rounds, folder))
        if not args.no_postgres:
            sys.path.insert(0, str(HERE.parent / "tests"))
            pgserver = importlib.import_module("pgserver")
            bin_dir = pgserver.find_bin_dir()
            if bin_dir is None:
                sys.exit("PostgreSQL is not installed (or pass --no-postgres)")
            server = pgserver.PgServer(bin_dir).start()
            try:
                url = server.create_database("durable_overhead")
                results["postgresql"] = asyncio.run(
                    on_store("postgresql", url, args.steps, args.rounds, folder)
                )
            finally:
                server.stop()
    results["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    args.out.parent.mkdir(exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
