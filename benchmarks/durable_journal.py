"""Durable sessions (issue 30): the cost of one step recorded in the session journal.

Run: ``uv run python benchmarks/durable_journal.py`` (PostgreSQL binaries must be installed,
as for the tests). Writes ``benchmarks/results/durable_journal.json``.

With ``durable_sessions`` on, the engine calls :meth:`SessionJournal.record
<retinue.store.journal.SessionJournal.record>` after every model reply and every tool
result. What is measured is that call for the usual step: a history that grew by a **2-message
tail** (an assistant reply asking for a tool, and the tool's result, about 0.5 KB each),
``keep`` = what was recorded before, with a record carrying some steering, usage and a small
``extra``. Each call is timed on its own (wall, and this process's CPU: every thread; the
PostgreSQL server's CPU is not counted); the figures are the medians over ``--rounds`` rounds
of ``--steps`` calls each, after a warm-up round.

Variants, each on SQLite (the memory database in a temporary folder: WAL,
``synchronous=NORMAL``) and PostgreSQL (a throwaway server started here, ``fsync=off`` as in
the tests):

* ``journal``: :meth:`record` on a history starting with 2 messages (system, user);
* ``journal-long``: the same with ``--long`` messages already recorded (the cost must not
  grow with the history: only the tail is written, the stored count is read from the record
  row);
* ``conversation-save``: for comparison, :meth:`ConversationStore.save` of the same tail
  (what ``durable_steps.py`` measured as "Retinue's store": 7 round trips on PostgreSQL);
* ``load``: what a resume reads, :meth:`SessionJournal.load` of a ``--long``-message
  session (median of 20, after one).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from _common import load_average, write_result  # noqa: E402

from retinue.memory import MemoryBackend, PostgresMemory, SQLiteMemory, open_store  # noqa: E402
from retinue.messages import (  # noqa: E402
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from retinue.store.journal import SessionRecord  # noqa: E402

Step = Callable[[str, list[Message], int], Awaitable[None]]
"""Record one step: (session id, history, keep)."""


def tail(i: int) -> list[Message]:
    """One step's two messages: a reply asking for a tool, and its result (~0.5 KB each)."""
    call = ToolCall(f"call-{i}", "Read", f'{{"file_path": "src/module_{i}.py"}}')
    return [
        AssistantMessage("Let me read the next module to check the imports. " * 8, (call,)),
        ToolResultMessage(f"call-{i}", "Read", "import os\nimport sys\n" * 24),
    ]


def record_of(sid: str, step: int) -> SessionRecord:
    return SessionRecord(
        sid,
        "conv-bench",
        "conv-bench",
        "interactive",
        "researcher",
        state="running",
        turns=step,
        usage=(1200 * step, 300 * step, 800 * step, step),
        steering=("keep it short",),
        extra={"budget": {"usd": 0.5, "spent": 0.01 * step}, "pending": [f"call-{step}"]},
    )


_sessions = iter(range(1, 1_000_000))


async def measure(step: Step, start: list[Message], steps: int) -> tuple[list[float], list[float]]:
    """Per-call wall and CPU milliseconds of ``steps`` steps of a new session whose history
    is ``start`` (recorded first, untimed)."""
    sid = f"conv-bench/researcher-{next(_sessions)}"
    history = list(start)
    await step(sid, history, 0)
    walls, cpus = [], []
    for i in range(steps):
        kept = len(history)
        history += tail(i)
        w0, c0 = time.perf_counter(), time.process_time()
        await step(sid, history, kept)
        walls.append((time.perf_counter() - w0) * 1000)
        cpus.append((time.process_time() - c0) * 1000)
    return walls, cpus


def steps_of(store: MemoryBackend) -> dict[str, tuple[Step, int]]:
    """The variants: how one step is recorded, and how long the history starts."""

    async def journal(sid: str, history: list[Message], keep: int) -> None:
        await store.journal.record("bench", record_of(sid, len(history)), history, keep=keep)

    async def save(sid: str, history: list[Message], keep: int) -> None:
        await store.conversations.save("bench", sid, history, keep=keep)

    return {
        "journal": (journal, 2),
        "journal-long": (journal, ARGS.long),
        "conversation-save": (save, 2),
    }


def start_history(n: int) -> list[Message]:
    out: list[Message] = [SystemMessage("You are a researcher. " * 20), UserMessage("Go.")]
    for i in range(max(0, n - 2) // 2):
        out += tail(100_000 + i)
    return out


async def run_backend(store: MemoryBackend) -> dict[str, Any]:
    if isinstance(store, PostgresMemory):
        await store.pool()
    out: dict[str, Any] = {}
    for name, (step, length) in steps_of(store).items():
        start = start_history(length)
        await measure(step, start, min(20, ARGS.steps))  # warm-up
        walls: list[float] = []
        cpus: list[float] = []
        round_walls: list[float] = []
        for _ in range(ARGS.rounds):
            w, c = await measure(step, start, ARGS.steps)
            walls += w
            cpus += c
            round_walls.append(statistics.median(w))
        out[name] = {
            "history_at_start": len(start),
            "wall_ms_median": round(statistics.median(walls), 4),
            "cpu_ms_median": round(statistics.median(cpus), 4),
            "wall_ms_p90": round(statistics.quantiles(walls, n=10)[-1], 4),
            "round_wall_ms_medians": [round(x, 4) for x in round_walls],
        }
        print(store.__class__.__name__, name, out[name], file=sys.stderr)
    out["load"] = await measure_load(store)
    print(store.__class__.__name__, "load", out["load"], file=sys.stderr)
    return out


async def measure_load(store: MemoryBackend, times: int = 20) -> dict[str, Any]:
    """What a resume reads: ``load`` of one session of ``--long`` messages (median)."""
    sid = f"conv-load/researcher-{next(_sessions)}"
    history = start_history(ARGS.long)
    await store.journal.record("bench", record_of(sid, 1), history)
    walls, cpus = [], []
    for _ in range(times + 1):
        w0, c0 = time.perf_counter(), time.process_time()
        loaded = await store.journal.load("bench", sid)
        walls.append((time.perf_counter() - w0) * 1000)
        cpus.append((time.process_time() - c0) * 1000)
        assert loaded is not None and len(loaded[1]) == len(history)
    return {
        "messages": len(history),
        "wall_ms_median": round(statistics.median(walls[1:]), 3),
        "cpu_ms_median": round(statistics.median(cpus[1:]), 3),
    }


async def main() -> dict[str, Any]:
    pgserver = importlib.import_module("pgserver")
    results: dict[str, Any] = {
        "steps": ARGS.steps,
        "rounds": ARGS.rounds,
        "tail_messages": 2,
        "load_average_before": load_average(),
    }
    with tempfile.TemporaryDirectory(prefix="durable-journal-") as tmp:
        sqlite = open_store(Path(tmp))
        assert isinstance(sqlite, SQLiteMemory)
        try:
            results["sqlite"] = await run_backend(sqlite)
        finally:
            sqlite.close()
    bin_dir = pgserver.find_bin_dir()
    if bin_dir is None:
        results["postgresql"] = "skipped: PostgreSQL is not installed"
    else:
        server = pgserver.PgServer(bin_dir).start()
        try:
            pg = PostgresMemory(server.create_database("journal_bench"))
            try:
                results["postgresql"] = await run_backend(pg)
            finally:
                await pg.aclose()
        finally:
            server.stop()
    results["load_average_after"] = load_average()
    results["machine"] = {"python": platform.python_version(), "platform": platform.platform()}
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--long", type=int, default=1000, help="messages before journal-long")
    parser.add_argument("--out", default="durable_journal")
    ARGS = parser.parse_args()
    print(write_result(ARGS.out, asyncio.run(main())))
