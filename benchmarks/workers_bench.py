"""Several ``retinue serve`` workers on one PostgreSQL database, and the memory store's speed
on PostgreSQL against SQLite.

Run: ``uv run --extra local python benchmarks/workers_bench.py [--quick]``. Writes
``benchmarks/results/workers.json`` and the Markdown fragment ``workers.md``
(``workers-quick.*`` with ``--quick``).

**Workers.** For 1, 2 and 4 workers (real ``retinue serve`` processes, each with its own data
directory, all on one throwaway PostgreSQL server started here), ``--conversations``
conversations (1,000) run at once, each sending ``--messages`` messages in turn; message
``k`` of conversation ``c`` goes to worker ``(c + k) mod N``, so conversations move between
workers on every message. The model is a scripted one behind a loopback OpenAI server
(answers at once), so the figures are the service's own cost: HTTP, the conversation lease,
restoring and saving the history, the agent loop. Throughput is turns per second of wall
time; latency is each request's, seen by the client. Every worker count runs ``--rounds``
times (3), the counts alternating, and the run of median throughput is reported.

**Memory operations.** The same mix (set a core block, insert a passage, search) by 16
concurrent tasks on distinct scopes, against SQLite in a temporary folder and against the
PostgreSQL database, in operations per second (median of 5 alternating rounds).

Wall and CPU time (this process, and the workers' and the database's as children) and the
machine's load average are written next to the figures: the machine is shared.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from _common import RESULTS_DIR, load_average

from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.memory import MemoryBackend, PostgresMemory, open_store
from retinue.testing import ScriptedModel

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
pgserver = importlib.import_module("pgserver")  # tests/pgserver.py: the tests' throwaway server


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))] if ordered else float("nan")


def cpu_seconds() -> dict[str, float]:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "self": me.ru_utime + me.ru_stime,
        "children": kids.ru_utime + kids.ru_stime,
    }


class Worker:
    """One ``retinue serve`` process (its own data directory and token)."""

    def __init__(self, home: Path, env: dict[str, str], max_turns: int) -> None:
        home.mkdir(parents=True)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "retinue", "serve", "--port", "0", "-m", "openai:bench",
             "-q", "--max-turns", str(max_turns)],
            env=env | {"RETINUE_HOME": str(home)}, cwd=home, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self.proc.stderr is not None
        banner = self.proc.stderr.readline()
        if not banner.startswith("retinue serving"):
            raise RuntimeError(f"worker did not start: {banner}{self.proc.stderr.read()}")
        self.url = banner.split()[-1]
        self.token = (home / "server-token").read_text().strip()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stderr is not None:
            self.proc.stderr.close()


async def drive(workers: list[Worker], conversations: int, messages: int) -> dict[str, Any]:
    """Every conversation at once, each sending its messages in turn, across the workers."""
    # A new connection per request: this busy client reads answers late, and a kept-alive
    # connection may be closed by uvicorn (5 s idle) just as it is reused (ReadError).
    limits = httpx.Limits(max_connections=conversations, max_keepalive_connections=0)
    clients = [
        httpx.AsyncClient(
            base_url=w.url,
            timeout=300,
            limits=limits,
            headers={"Authorization": f"Bearer {w.token}"},
        )
        for w in workers
    ]
    latencies: list[float] = []
    failures: dict[str, int] = {}

    async def conversation(c: int) -> None:
        for k in range(messages):
            client = clients[(c + k) % len(clients)]
            started = time.perf_counter()
            try:
                reply = await client.post(
                    f"/v1/conversations/bench-{c}/messages", json={"content": f"message {k}"}
                )
                ok = reply.status_code == 200
                key = str(reply.status_code)
            except httpx.HTTPError as exc:
                ok, key = False, type(exc).__name__
            if ok:
                latencies.append((time.perf_counter() - started) * 1000)
            else:
                failures[key] = failures.get(key, 0) + 1

    cpu = cpu_seconds()
    wall = time.perf_counter()
    try:
        await asyncio.gather(*(conversation(c) for c in range(conversations)))
    finally:
        for client in clients:
            await client.aclose()
    elapsed = time.perf_counter() - wall
    return {
        "workers": len(workers),
        "conversations": conversations,
        "turns": len(latencies),
        "failed": failures,
        "wall_s": round(elapsed, 2),
        "turns_per_s": round(len(latencies) / elapsed, 1),
        "p50_ms": round(percentile(latencies, 0.50), 1),
        "p95_ms": round(percentile(latencies, 0.95), 1),
        "bench_cpu_s": round(cpu_seconds()["self"] - cpu["self"], 2),
    }


def run_workers(
    count: int, root: Path, database_url: str, base_env: dict[str, str], args: argparse.Namespace
) -> dict[str, Any]:
    env = base_env | {"RETINUE_DATABASE_URL": database_url}
    workers: list[Worker] = []
    children = cpu_seconds()["children"]
    load_before = load_average()
    try:
        for i in range(count):
            workers.append(Worker(root / f"w{count}-{i}", env, args.conversations))
        result = asyncio.run(drive(workers, args.conversations, args.messages))
    finally:
        for w in workers:
            w.stop()
    result["workers_cpu_s"] = round(cpu_seconds()["children"] - children, 2)
    result["load_before"], result["load_after"] = load_before, load_average()
    return result


async def memory_ops(store: MemoryBackend, tasks: int, per_task: int) -> dict[str, Any]:
    """``tasks`` concurrent tasks, each on its own scope: set, insert, search per round."""

    async def one(t: int) -> None:
        for i in range(per_task):
            await store.set_block("bench", f"role{t}", "human", f"round {i} of task {t}")
            await store.insert_passage("bench", f"role{t}", f"fact {i} about item{t}x{i} here")
            await store.search("bench", f"role{t}", f"item{t}x{i} fact")

    await store.blocks("bench", "warm-up")  # open, migrate
    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(one(t) for t in range(tasks)))
    elapsed = time.perf_counter() - wall
    ops = tasks * per_task * 3
    return {
        "ops": ops,
        "wall_s": round(elapsed, 2),
        "ops_per_s": round(ops / elapsed, 1),
        "process_cpu_s": round(time.process_time() - cpu, 2),
    }


def compare_stores(database_url: str, root: Path, per_task: int, rounds: int) -> dict[str, Any]:
    """Alternating rounds on each store (a fresh scope set each round); the median round."""
    runs: dict[str, list[dict[str, Any]]] = {"sqlite": [], "postgres": []}
    for r in range(rounds):
        for name, url in (("sqlite", None), ("postgres", database_url)):
            store = open_store(root / f"mem-{name}-{r}", url)
            if url is not None:
                asyncio.run(_empty(url))

            async def measure(s: MemoryBackend = store) -> dict[str, Any]:
                try:
                    return await memory_ops(s, 16, per_task)
                finally:
                    if isinstance(s, PostgresMemory):
                        await s.aclose()

            runs[name].append(asyncio.run(measure()) | {"load_after": load_average()})
            if not isinstance(store, PostgresMemory):
                store.close()
    out: dict[str, Any] = {"tasks": 16, "rounds": rounds}
    for name, results in runs.items():
        ranked = sorted(results, key=lambda m: m["ops_per_s"])
        out[name] = ranked[len(ranked) // 2] | {"all_ops_per_s": [m["ops_per_s"] for m in results]}
    return out


async def _empty(url: str) -> None:
    """Start a round on empty tables (the store has migrated them before, or does now)."""
    store = PostgresMemory(url)
    try:
        async with store.connection() as conn:
            await conn.execute("TRUNCATE blocks, passages")
    finally:
        await store.aclose()


def markdown(data: dict[str, Any]) -> str:
    lines = [
        "### Several workers on one PostgreSQL database",
        "",
        f"{data['conversations']} conversations at once, {data['messages']} messages each, "
        "message k of conversation c on worker (c + k) mod N; scripted loopback model "
        f"(no model time); {data['cpus']} CPUs, shared. `benchmarks/workers_bench.py`.",
        "",
        f"Each worker count ran {data['rounds']} times, the counts alternating; the row is the "
        "run of median throughput, the last column every run's turns/s.",
        "",
        "| workers | turns | failed | wall s | turns/s | p50 ms | p95 ms | workers CPU s "
        "| client + model CPU s | load before → after | every run, turns/s |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for count in dict.fromkeys(r["workers"] for r in data["runs"]):
        runs = sorted(
            (r for r in data["runs"] if r["workers"] == count), key=lambda r: r["turns_per_s"]
        )
        r = runs[len(runs) // 2]
        every = ", ".join(str(x["turns_per_s"]) for x in data["runs"] if x["workers"] == count)
        failed = sum(sum(x["failed"].values()) for x in runs)
        load = f"{r['load_before'][0] if r['load_before'] else '?'} → "
        load += f"{r['load_after'][0] if r['load_after'] else '?'}"
        lines.append(
            f"| {r['workers']} | {r['turns']} | {failed} | {r['wall_s']} | {r['turns_per_s']} "
            f"| {r['p50_ms']} | {r['p95_ms']} | {r['workers_cpu_s']} | {r['bench_cpu_s']} "
            f"| {load} | {every} |"
        )
    lines += [
        "",
        "Workers CPU: the `retinue serve` processes, start to stop. Client + model CPU: this "
        "benchmark's process, which sends the requests and also hosts the loopback model server. "
        "Their sum against wall time x CPUs shows how busy the machine was: when it is near "
        "the CPU count, more workers cannot add throughput on this machine. With every "
        "conversation in flight at once, latency is mostly queueing: about conversations / "
        "throughput.",
    ]
    mem = data["memory"]
    lines += [
        "",
        f"Memory operations ({mem['tasks']} concurrent tasks, each: set a core block, insert a "
        f"passage, search; distinct scopes; the median of {mem['rounds']} alternating rounds, "
        "all rounds' ops/s in the last column):",
        "",
        "| store | operations | wall s | ops/s | process CPU s | every round, ops/s |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for name in ("sqlite", "postgres"):
        m = mem[name]
        lines.append(
            f"| {name} | {m['ops']} | {m['wall_s']} | {m['ops_per_s']} | {m['process_cpu_s']} "
            f"| {', '.join(str(x) for x in m['all_ops_per_s'])} |"
        )
    lines += [
        "",
        "SQLite is in the process (WAL, synchronous=NORMAL); PostgreSQL is a round trip away on "
        "127.0.0.1, and its server's own CPU is not counted here.",
        "",
        f"Total wall {data['wall_s']} s; CPU {data['cpu_s']['self']} s in this process, "
        f"{data['cpu_s']['children']} s in the workers; load at the end "
        f"{data['load_end']}; PostgreSQL {data['postgres']}.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 conversations, 1 and 2 workers")
    parser.add_argument("--conversations", type=int, default=1000)
    parser.add_argument("--messages", type=int, default=2)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--rounds", type=int, default=3, help="runs of every worker count")
    args = parser.parse_args()
    if args.quick:
        args.conversations, args.workers, args.rounds = min(args.conversations, 100), "1,2", 1
    bin_dir = pgserver.find_bin_dir()
    if bin_dir is None:
        raise SystemExit("PostgreSQL is not installed (Debian: apt-get install postgresql)")
    started = time.perf_counter()
    server = pgserver.PgServer(bin_dir, settings={"max_connections": "200"}).start()
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RETINUE_"))}
    data: dict[str, Any] = {
        "conversations": args.conversations,
        "messages": args.messages,
        "rounds": args.rounds,
        "cpus": os.cpu_count(),
        "postgres": "15, fsync off (a throwaway server), on 127.0.0.1",
        "runs": [],
    }
    model = ScriptedModel(responder=lambda _m, _t: "ok")
    try:
        with (
            LoopbackOpenAIServer(model, record=False) as provider,
            tempfile.TemporaryDirectory() as tmp,
        ):
            base_env |= {"OPENAI_BASE_URL": provider.base_url, "OPENAI_API_KEY": "bench"}
            for r in range(args.rounds):  # the worker counts alternate within each round
                for count in (int(n) for n in args.workers.split(",")):
                    url = server.create_database(f"workers{count}-{r}")
                    root = Path(tmp) / f"round{r}"
                    data["runs"].append(run_workers(count, root, url, base_env, args))
                    print(json.dumps(data["runs"][-1]), file=sys.stderr)
            per_task = 20 if args.quick else 100
            memops = server.create_database("memops")
            data["memory"] = compare_stores(memops, Path(tmp), per_task, 1 if args.quick else 5)
    finally:
        server.stop()
    data["wall_s"] = round(time.perf_counter() - started, 1)
    data["cpu_s"] = {k: round(v, 1) for k, v in cpu_seconds().items()}
    data["load_end"] = load_average()
    name = "workers-quick" if args.quick else "workers"
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    (RESULTS_DIR / f"{name}.json").write_text(json.dumps(data, indent=2) + "\n")
    (RESULTS_DIR / f"{name}.md").write_text(markdown(data))
    print(markdown(data))


if __name__ == "__main__":
    main()
