"""Helpers shared by the benchmark scripts: the scenario every framework runs, timing, output.

The overhead scenario is the same for every framework (Retinue here, the peers under
``peers/``): a system prompt, an optional seeded history of ``history`` plain messages, one user
message ``bench turns=T history=H run=K``; the model asks for the no-op tool ``noop`` on every
turn but the last, then answers ``done``. A turn is one model round trip.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

HERE = Path(__file__).resolve().parent
RESULTS_DIR = HERE / "results"
SYSTEM = "You are a benchmark agent. Call the noop tool when asked; answer briefly."
TOOL_NAME = "noop"
FINAL = "done"
TASK_RE = re.compile(r"bench turns=(\d+)")

# (turns, seeded history) -> label; the same grid for every framework
GRID: dict[str, tuple[int, int]] = {
    "t100": (100, 0),
    "t10": (10, 0),
    "h10": (10, 10),
    "h200": (10, 200),
}


def task_text(turns: int, history: int, run: int) -> str:
    return f"bench turns={turns} history={history} run={run}"


def history_texts(n: int) -> list[tuple[str, str]]:
    """``n`` seeded messages as (role, text), alternating user / assistant, ~200 bytes each."""
    out = []
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        out.append((role, f"earlier {role} message {i}: " + "some words of context " * 8))
    return out


def wanted_turns(last_user_text: str) -> int:
    m = TASK_RE.search(last_user_text)
    return int(m.group(1)) if m else 1


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def median_pair(runs: Sequence[tuple[float, float]]) -> dict[str, float]:
    """``{"wall": ..., "cpu": ...}``: the medians of (wall, CPU) pairs."""
    return {"wall": median([r[0] for r in runs]), "cpu": median([r[1] for r in runs])}


async def timed(work: Awaitable[T]) -> tuple[T, float, float]:
    """``work``'s result, and its wall and CPU milliseconds (CPU: this process, every thread;
    the runner's loopback server lives in another process)."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = await work
    return out, (time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000


def load_average() -> list[float]:
    """The machine's 1, 5 and 15 minute load averages (other work competing for the CPUs)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def time_ms(fn: Callable[[], Any]) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1000


def emit_json(data: dict[str, Any]) -> None:
    """Print the one JSON result line a runner reads from a script's stdout."""
    sys.stdout.write(json.dumps(data) + "\n")
    sys.stdout.flush()


def write_result(name: str, data: dict[str, Any], out_dir: Path = RESULTS_DIR) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.json"
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path
