"""Speed of the SQLite memory store: archival search latency and consolidation write time.

Run: ``uv run python benchmarks/memory_bench.py [--quick]``. Writes
``benchmarks/results/memory.json`` (``memory-quick.json`` with ``--quick``, small enough for
CI). For each archive size (10k and 100k passages in one scope, next to a second tenant of
the same size so that scoping is part of the cost) it times full-text (BM25) searches through
the async API, then one consolidation end to end (ScriptedModel answer, related-passage
search, dedup, one transaction) and the transaction alone.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import random
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from retinue.memory import ConsolidationOptions, SQLiteMemory
from retinue.memory.sqlite import NewPassage
from retinue.messages import AssistantMessage, UserMessage
from retinue.testing import ScriptedModel, call_tool

RESULTS = Path(__file__).parent / "results"


def vocabulary(rng: random.Random, size: int = 20_000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choices(letters, k=rng.randint(3, 10))) for _ in range(size)]


def sentence(rng: random.Random, words: list[str], weights: list[float]) -> str:
    return " ".join(rng.choices(words, weights, k=rng.randint(8, 30)))


def fill(store: SQLiteMemory, tenant: str, count: int, rng: random.Random, words, weights):
    for start in range(0, count, 5000):
        batch = [
            NewPassage(sentence(rng, words, weights), "bench")
            for _ in range(min(5000, count - start))
        ]
        store.insert_passages_sync(tenant, "role", batch, near_duplicates=False)


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


async def time_searches(
    store: SQLiteMemory, queries: list[str], limit: int = 5
) -> dict[str, float]:
    times = []
    for q in queries:
        t = time.perf_counter()
        await store.search("a", "role", q, limit)
        times.append((time.perf_counter() - t) * 1000)
    return {
        "queries": len(times),
        "mean_ms": round(statistics.fmean(times), 3),
        "p50_ms": round(percentile(times, 0.50), 3),
        "p95_ms": round(percentile(times, 0.95), 3),
        "max_ms": round(max(times), 3),
    }


async def time_consolidation(
    store: SQLiteMemory, rng: random.Random, words, weights, runs: int
) -> dict[str, float]:
    total, write = [], []
    for i in range(runs):
        passages = [sentence(rng, words, weights) for _ in range(20)]
        model = ScriptedModel(
            [
                call_tool(
                    "memorize",
                    {
                        "block_updates": [
                            {"block": "human", "value": f"run {i}: " + passages[0][:500]},
                            {"block": "working_context", "value": passages[1]},
                        ],
                        "new_passages": passages,
                    },
                )
            ]
        )
        convo = [
            m
            for _ in range(20)
            for m in (
                UserMessage(sentence(rng, words, weights)),
                AssistantMessage(sentence(rng, words, weights)),
            )
        ]
        t = time.perf_counter()
        result = await store.consolidate_session(
            tenant="a", role="role", session_id=f"bench{i}", messages=convo, model=model
        )
        total.append((time.perf_counter() - t) * 1000)
        assert result.ok, result.error
        more = [NewPassage(sentence(rng, words, weights), "bench") for _ in range(20)]
        t = time.perf_counter()
        store.apply_consolidation(
            run_id=f"direct{i}",
            tenant="a",
            role="role",
            session_id=f"direct{i}",
            block_updates={"persona": f"persona {i}"},
            passages=more,
        )
        write.append((time.perf_counter() - t) * 1000)
    return {
        "runs": runs,
        "passages_per_run": 20,
        "end_to_end_mean_ms": round(statistics.fmean(total), 3),
        "end_to_end_p95_ms": round(percentile(total, 0.95), 3),
        "transaction_mean_ms": round(statistics.fmean(write), 3),
        "transaction_p95_ms": round(percentile(write, 0.95), 3),
    }


async def bench_size(size: int, queries: int, runs: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    words = vocabulary(rng)
    weights = [1.0 / (rank + 1) for rank in range(len(words))]  # Zipf-like word frequencies
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteMemory(Path(tmp) / "memory.db", options=ConsolidationOptions())
        t = time.perf_counter()
        fill(store, "a", size, rng, words, weights)
        fill(store, "b", size, rng, words, weights)  # another tenant of the same size
        load_s = time.perf_counter() - t
        qs = [" ".join(rng.choices(words, weights, k=3)) for _ in range(queries)]
        rare = [" ".join(rng.choices(words[1000:], k=3)) for _ in range(queries)]
        out = {
            "passages_in_scope": size,
            "passages_in_db": 2 * size,
            "load_seconds": round(load_s, 2),
            "db_mb": round((Path(tmp) / "memory.db").stat().st_size / 1e6, 1),
            "search_common_words": await time_searches(store, qs),
            "search_rare_words": await time_searches(store, rare),
            "consolidation": await time_consolidation(store, rng, words, weights, runs),
        }
        store.close()
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description="SQLite memory store benchmark")
    parser.add_argument("--quick", action="store_true", help="small sizes, for CI")
    args = parser.parse_args()
    sizes = [1_000, 5_000] if args.quick else [10_000, 100_000]
    queries, runs = (30, 3) if args.quick else (200, 10)
    results: dict[str, Any] = {
        "benchmark": "memory",
        "quick": args.quick,
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "machine": platform.machine(),
        "sizes": {},
    }
    for size in sizes:
        results["sizes"][str(size)] = asyncio.run(bench_size(size, queries, runs, seed=size))
        print(json.dumps({str(size): results["sizes"][str(size)]}, indent=2))
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / ("memory-quick.json" if args.quick else "memory.json")
    path.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
