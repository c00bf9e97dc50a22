"""What tracing adds to a turn (issue 28).

The in-process scenario of ``overhead.py`` (``ScriptedModel`` answering at once, 100 model
round trips of a no-op plain tool, in one session turn), timed three ways:

- ``before``: the code before tracing existed (``--before DIR``: a ``src`` tree of that
  commit, run in a subprocess of its own), against ``off`` in a subprocess the same way,
  alternated round by round: the per-turn overhead of the hooks with tracing off;
- ``off``: tracing off (no endpoint; the engine tests its tracer slot for None per hook);
- ``on``: tracing on, the OpenTelemetry SDK with a span processor whose exporter drops
  everything (no-op): the added cost per span is ``(on - off) / spans``.

Run: ``uv run python benchmarks/tracing_overhead.py [--rounds N] [--before DIR] [--out F]``; writes
``benchmarks/results/tracing_overhead.json`` (or ``F``) and prints it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from statistics import median
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # _common, overhead
from _common import load_average  # noqa: E402

TURNS = 100
RESULT = HERE / "results" / "tracing_overhead.json"


async def one_run(run_no: int) -> tuple[float, float]:
    """Per model round trip (wall, CPU) microseconds of one 100-round-trip session turn."""
    from _common import FINAL, timed
    from overhead import inproc_model, noop, seeded, task_text

    from retinue.engine import RunConfig
    from retinue.engine.session import Session
    from retinue.tools import ToolContext, ToolRegistry

    ctx = ToolContext("bench", Path.cwd(), Path.cwd())
    messages = seeded(0, task_text(TURNS, 0, run_no))
    task = messages.pop().content
    config = RunConfig(
        inproc_model(), messages, ToolRegistry([noop]), ctx, max_iterations=TURNS + 5,
        repeat_limit=None,  # the scenario's no-op call is the same every turn, by design
    )  # fmt: skip
    session = Session("bench", config)
    out, wall, cpu = await timed(session.send(task))
    if out.iterations != TURNS or out.content != FINAL:
        raise RuntimeError(f"run went wrong: {out.iterations} turns, {out.content!r}")
    return wall / TURNS * 1000, cpu / TURNS * 1000  # (timed gives ms)


async def runs(n: int, offset: int) -> list[tuple[float, float]]:
    await one_run(-1)  # warm-up
    return [await one_run(offset + i) for i in range(n)]


def child(n: int, offset: int) -> None:
    """In a subprocess: ``n`` runs with whatever ``retinue`` is on the path; JSON out."""
    print(json.dumps(asyncio.run(runs(n, offset))))


def in_subprocess(src: Path, n: int, offset: int) -> list[tuple[float, float]]:
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{HERE}"}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(n), str(offset)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return [tuple(x) for x in json.loads(done.stdout)]  # type: ignore[misc]


class Dropping:
    """A span exporter that drops every span (the no-op exporter), counting them."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Any) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        self.spans += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


def stats(values: list[tuple[float, float]]) -> dict[str, float]:
    return {
        "wall_us_per_turn": round(median(w for w, _ in values), 2),
        "cpu_us_per_turn": round(median(c for _, c in values), 2),
    }


def hooks_ns() -> float:
    """Nanoseconds the tracing-off hooks of one model round trip take, timed alone: the
    tracer slot's ``is None`` test before the model call, the ``chat is not None`` test after
    it, and the slot's test in the one-call fast path of the tools (the statements the loop
    has for tracing, :mod:`retinue.engine.observer`)."""
    import timeit

    from retinue import _tracer

    def with_hooks() -> None:
        chat = None
        if _tracer.current is not None:
            chat = 1
        if chat is not None:
            chat = None
        if _tracer.current is None:
            return

    def without() -> None:
        return

    n = 1_000_000
    best_with = min(timeit.repeat(with_hooks, number=n, repeat=7))
    best_without = min(timeit.repeat(without, number=n, repeat=7))
    return round((best_with - best_without) / n * 1e9, 1)


def measure(rounds: int, per_round: int, before: Path | None) -> dict[str, Any]:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from retinue.telemetry import trace as tel

    out: dict[str, Any] = {"turns_per_run": TURNS, "rounds": rounds, "runs_per_round": per_round}
    out["load"] = load_average()
    out["hooks_off_ns_per_round_trip"] = hooks_ns()
    src = Path(tel.__file__).resolve().parents[2]
    if before is not None:  # the hooks' cost, tracing off: the code before against today's
        old: list[tuple[float, float]] = []
        new: list[tuple[float, float]] = []
        ratios: list[float] = []  # per round: today's CPU median / the code before's
        for k in range(rounds):
            pair = [(before, old), (src, new)]
            for tree, into in pair if k % 2 == 0 else reversed(pair):
                into.extend(in_subprocess(tree, per_round, k * per_round))
            ratios.append(
                median(c for _, c in new[-per_round:]) / median(c for _, c in old[-per_round:])
            )
        out["before"], out["off_subprocess"] = stats(old), stats(new)
        out["off_vs_before_cpu_ratio"] = round(
            out["off_subprocess"]["cpu_us_per_turn"] / out["before"]["cpu_us_per_turn"], 3
        )
        out["off_vs_before_cpu_ratio_per_round"] = {
            "median": round(median(ratios), 3),
            "min": round(min(ratios), 3),
            "max": round(max(ratios), 3),
        }
    exporter = Dropping()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))  # type: ignore[arg-type]
    off: list[tuple[float, float]] = []
    on: list[tuple[float, float]] = []
    asyncio.run(runs(1, -10))
    for k in range(rounds):
        for mode in ("off", "on") if k % 2 == 0 else ("on", "off"):
            if mode == "on":
                tel.enable(provider)
            try:
                (on if mode == "on" else off).extend(asyncio.run(runs(per_round, k * 100)))
            finally:
                tel.disable()
    out["off"], out["on"] = stats(off), stats(on)
    spans_per_turn = exporter.spans / ((len(on) + rounds) * TURNS)  # (warm-ups included)
    out["spans_per_round_trip"] = round(spans_per_turn, 3)
    added_cpu = out["on"]["cpu_us_per_turn"] - out["off"]["cpu_us_per_turn"]
    added_wall = out["on"]["wall_us_per_turn"] - out["off"]["wall_us_per_turn"]
    out["added_cpu_us_per_span"] = round(added_cpu / spans_per_turn, 2)
    out["added_wall_us_per_span"] = round(added_wall / spans_per_turn, 2)
    return out


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        child(int(sys.argv[2]), int(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description="What tracing adds to a turn")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--runs", type=int, default=5, help="runs per round and variant")
    parser.add_argument("--before", type=Path, help="a src/ tree from before tracing")
    parser.add_argument("--out", type=Path, default=RESULT, help=f"default: {RESULT.name}")
    args = parser.parse_args()
    result = measure(args.rounds, args.runs, args.before)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
