"""Conversations on Temporal beside several workers on PostgreSQL, on this machine.

Run: ``uv run python benchmarks/temporal_bench.py [--quick]``. Writes
``benchmarks/results/temporal_bench.json`` and prints a Markdown section
(``temporal_bench-quick.json`` with ``--quick``).

Both paths are driven the same way, over HTTP by this process, with the same scripted model
behind a loopback OpenAI server (answers at once: the figures are the service's own cost).
Each turn is one tool call (``Read`` of a small file) and an answer, so two model calls:

* **PostgreSQL**: N ``retinue serve`` workers on one throwaway PostgreSQL server (fsync off);
  message ``k`` of conversation ``c`` goes to worker ``(c + k) mod N``.
* **Temporal**: one ``retinue serve --temporal`` front end and N ``retinue worker
  --temporal`` processes on the Temporal dev server (``temporal server start-dev``, SQLite
  file); every message goes through the front end.

For each path and N in 1, 2, 4, after one warm-up turn through each server: **latency**, one
conversation's ``--turns`` sequential turns (20; p50 and p95 as the client sees them, nothing
else running); **throughput**, ``--conversations`` conversations at once (20), ``--messages``
messages each (3); **CPU per turn**, the CPU seconds of every process of the path (workers,
front end, and the Temporal server or the PostgreSQL server, read from ``/proc``, each group
recorded) over both phases, divided by the turns; **bytes per turn**, the Temporal workflow
histories' size (events as protobuf) or the growth of the PostgreSQL database, divided by the
turns. The load average is recorded: the machine is shared.

``--history-growth`` measures instead how one conversation's workflow history grows with its
turns (in-process worker with an SQLite memory store, the scripted model, one tool call per
turn): the bytes each turn adds, with the history sent by reference (today) and sent whole
with each model call (``Limits(inline_bytes=0)``, as before by-reference), for a short tool
result and a 20 kB one. Writes ``temporal_history_growth.json``."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
from _common import RESULTS_DIR, load_average
from workers_bench import Worker, drive, percentile

from retinue.llm.base import ToolSpec
from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.messages import Message, UserMessage
from retinue.testing import ScriptedModel, call_tool

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
pgserver = importlib.import_module("pgserver")  # tests/pgserver.py: the tests' throwaway server

TICKS = os.sysconf("SC_CLK_TCK")
TOKEN = "bench-token"  # every process's (RETINUE_TOKEN): one tenant, one token


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tree_cpu(roots: Sequence[int]) -> float:
    """CPU seconds (user + system) of the processes ``roots`` and their descendants, alive
    now, and of their waited-for children."""
    parents: dict[int, int] = {}
    stats: dict[int, list[str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "stat").read_text()
        except OSError:
            continue
        fields = raw[raw.rindex(")") + 2 :].split()
        pid = int(entry.name)
        parents[pid], stats[pid] = int(fields[1]), fields
    wanted = set(roots)
    grew = True
    while grew:
        more = {p for p, parent in parents.items() if parent in wanted} - wanted
        wanted |= more
        grew = bool(more)
    total = 0
    for pid in wanted & stats.keys():
        f = stats[pid]  # utime, stime, cutime, cstime are fields 14-17 (index 11-14 here)
        total += sum(int(x) for x in f[11:15])
    return total / TICKS


def turn_model() -> ScriptedModel:
    """A tool call on each user message, then an answer."""

    def respond(messages: Sequence[Message], _tools: Sequence[ToolSpec]) -> Any:
        if isinstance(messages[-1], UserMessage):
            return call_tool("Read", {"file_path": "note.txt"})
        return "ok"

    return ScriptedModel(responder=respond, record=False)


class Proc(Worker):
    """A ``retinue`` process; a server's first stderr line ends with its URL."""

    def __init__(  # (not Worker's: any command line; the shared token)
        self, args: list[str], env: dict[str, str], cwd: Path, *, url: bool
    ) -> None:
        cwd.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "retinue", *args], env=env, cwd=cwd, text=True,
            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        self.url, self.token = "", TOKEN
        assert self.proc.stderr is not None
        banner = self.proc.stderr.readline()  # (a worker's: "retinue worker on ...")
        if not banner.startswith("retinue serving" if url else "retinue worker"):
            raise RuntimeError(f"did not start: {banner}{self.proc.stderr.read()}")
        if url:
            self.url = banner.split()[-1]


async def latency(url: str, token: str, turns: int, cid: str) -> list[float]:
    """``turns`` sequential turns of one conversation: each turn's milliseconds."""
    out: list[float] = []
    async with httpx.AsyncClient(
        base_url=url, timeout=120, headers={"Authorization": f"Bearer {token}"}
    ) as client:
        for k in range(turns):
            started = time.perf_counter()
            r = await client.post(f"/v1/conversations/{cid}/messages", json={"content": f"m{k}"})
            r.raise_for_status()
            out.append((time.perf_counter() - started) * 1000)
    return out


def measure(
    procs: list[Worker],
    groups: dict[str, list[int]],
    args: argparse.Namespace,
    warmed: Callable[[], None],
) -> dict[str, Any]:
    """After a warm-up turn through each server of ``procs``: latency, then throughput; the
    CPU of each group of processes (and their descendants)."""
    for p in procs:  # (first connections, schema, caches: not measured)
        asyncio.run(latency(p.url, TOKEN, 1, f"warm{procs.index(p)}"))
    warmed()
    cpu = {name: tree_cpu(pids) for name, pids in groups.items()}
    load_before = load_average()
    lat = asyncio.run(latency(procs[0].url, TOKEN, args.turns, "seq"))
    thr = asyncio.run(drive(procs, args.conversations, args.messages))
    turns = len(lat) + thr["turns"]
    used = {name: round(tree_cpu(pids) - cpu[name], 2) for name, pids in groups.items()}
    return {
        "latency_p50_ms": round(percentile(lat, 0.5), 1),
        "latency_p95_ms": round(percentile(lat, 0.95), 1),
        **{
            f"throughput_{k}": thr[k]
            for k in ("turns", "failed", "wall_s", "turns_per_s", "p50_ms", "p95_ms")
        },
        "cpu_s": used,
        "cpu_ms_per_turn": round(1000 * sum(used.values()) / turns, 1),
        "turns": turns,
        "load_before": load_before,
        "load_after": load_average(),
    }


def postgres_run(
    count: int, server: Any, env: dict[str, str], root: Path, args: argparse.Namespace
) -> dict[str, Any]:
    url = server.create_database(f"tb{count}")
    env = env | {"RETINUE_DATABASE_URL": url}
    workers: list[Worker] = []
    try:
        for i in range(count):
            home = root / f"pg{count}-{i}"
            home.mkdir(parents=True)
            (home / "note.txt").write_text("a small note\n")
            workers.append(Proc(["serve", "--port", "0", "-m", "openai:bench", "-q",
                                 "--max-turns", str(args.conversations)],
                                env | {"RETINUE_HOME": str(home)}, home, url=True))  # fmt: skip
        groups = {"workers": [w.proc.pid for w in workers], "server": server_pids(server)}
        size: list[int] = []
        result = measure(workers, groups, args, lambda: size.append(db_size(url)))
        result["bytes_per_turn"] = round((db_size(url) - size[0]) / result["turns"])
    finally:
        for w in workers:
            w.stop()
    return {"path": "postgres", "workers": count, **result}


def server_pids(server: Any) -> list[int]:
    pidfile = Path(server.data) / "postmaster.pid"
    return [int(pidfile.read_text().split()[0])]


def db_size(url: str) -> int:
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
    return int(row[0]) if row else 0


def temporal_run(
    count: int, address: str, server_pid: int, env: dict[str, str], root: Path,
    args: argparse.Namespace,
) -> dict[str, Any]:  # fmt: skip
    queue = f"bench{count}-{os.getpid()}"
    home = root / f"t{count}"
    home.mkdir(parents=True)
    (home / "note.txt").write_text("a small note\n")
    env = env | {"RETINUE_HOME": str(home)}
    procs: list[Proc] = []
    try:
        where = ["--temporal", address, "--task-queue", queue, "--tenant", queue]
        work = [
            "worker",
            *where,
            "-m",
            "openai:bench",
            "-q",
            "--permission-mode",
            "bypassPermissions",
        ]
        procs += [Proc(work, env, home, url=False) for _ in range(count)]
        front = Proc(["serve", *where, "--port", "0", "--max-turns", str(args.conversations)],
                     env, home, url=True)  # fmt: skip
        procs.append(front)
        groups = {"workers": [p.proc.pid for p in procs[:-1]], "front": [front.proc.pid],
                  "server": [server_pid]}  # fmt: skip
        result = measure([front], groups, args, lambda: None)
        result["bytes_per_turn"] = round(
            asyncio.run(history_bytes(address, queue)) / result["turns"]
        )
    finally:
        for p in procs:
            p.stop()
    return {"path": "temporal", "workers": count, **result}


async def history_bytes(address: str, queue: str) -> int:
    """The size of every conversation workflow's history on ``queue`` (events as protobuf)."""
    from temporalio.client import Client

    client = await Client.connect(address)
    total = 0
    async for w in client.list_workflows(f"TaskQueue = '{queue}'"):
        if "/warm" in w.id:  # (the warm-up turns are not counted)
            continue
        history = await client.get_workflow_handle(w.id, run_id=w.run_id).fetch_history()
        total += sum(e.ByteSize() for e in history.events)
    return total


def start_temporal(root: Path) -> tuple[subprocess.Popen[bytes], str]:
    binary = Path(sys.executable).parent / "temporal"
    port = free_port()
    proc = subprocess.Popen(
        [str(binary), "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port",
         str(port), "--http-port", str(free_port()), "--metrics-port", str(free_port()),
         "--db-filename", str(root / "temporal.db"), "--log-level", "error"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    address = f"127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while not asyncio.run(_serving(address)):
        if time.monotonic() > deadline or proc.poll() is not None:
            raise RuntimeError("the Temporal dev server did not start")
        time.sleep(0.2)
    return proc, address


async def _serving(address: str) -> bool:
    from temporalio.client import Client

    try:
        await Client.connect(address)
    except RuntimeError:
        return False
    return True


def growth_run(
    address: str, root: Path, turns: int, result_chars: int, inline: int
) -> tuple[list[int], int]:
    """The bytes of workflow history each of ``turns`` turns adds (a tool call whose result
    is ``result_chars`` long, then an answer; ``inline``: ``Limits.inline_bytes``), and the
    bytes the memory store keeps by reference at the end."""
    from temporalio.client import Client

    from retinue.config import Settings
    from retinue.runtime import Runtime
    from retinue.temporal._types import Limits
    from retinue.temporal.client import TemporalConversations
    from retinue.temporal.worker import make_worker
    from retinue.tools.base import tool

    @tool
    async def fetch() -> str:
        """Return a text."""
        return ("result " * (result_chars // 7 + 1))[:result_chars]

    def respond(messages: Sequence[Message], _tools: Sequence[ToolSpec]) -> Any:
        return call_tool("fetch") if isinstance(messages[-1], UserMessage) else "ok"

    home = root / f"growth-{result_chars}-{inline}"
    home.mkdir(parents=True)
    model = ScriptedModel(responder=respond, record=False)
    runtime = Runtime.create(
        Settings(home=home / "home", workspace=home), model=model, model_for=lambda _s: model,
        extra_tools=[fetch], builtins=False,
    )  # fmt: skip

    async def drive() -> list[int]:
        client = await Client.connect(address)
        convs = TemporalConversations(
            client, task_queue=f"growth-{result_chars}-{inline}", limits=Limits(inline_bytes=inline)
        )
        grown, before = [], 0
        cid = convs.task_queue  # (each run its own workflow)
        sizes: dict[str, int] = {}  # the bytes of each run (continue-as-new starts another)
        current, wid = "", convs.handle(cid).id
        async with make_worker(client, runtime, convs.task_queue):
            for k in range(turns):
                await convs.send(cid, f"message {k}")
                run = (await convs.handle(cid).describe()).run_id or ""
                if current and run != current:  # (the run before ended: read it whole)
                    sizes[current] = await run_bytes(client, wid, current)
                sizes[run], current = await run_bytes(client, wid, run), run
                now = sum(sizes.values())
                grown.append(now - before)
                before = now
        return grown

    grown = asyncio.run(drive())
    return grown, stored_bytes(home / "home")


def stored_bytes(home: Path) -> int:
    """The bytes of content kept by reference in the memory store under ``home``."""
    import sqlite3

    total = 0
    for db in home.rglob("*.db"):
        with contextlib.closing(sqlite3.connect(db)) as conn:
            total += conn.execute("SELECT coalesce(sum(size), 0) FROM blobs").fetchone()[0]
    return total


async def run_bytes(client: Any, workflow_id: str, run_id: str) -> int:
    history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
    return sum(e.ByteSize() for e in history.events)


def history_growth(turns: int) -> dict[str, Any]:
    """:func:`growth_run` for each result size, by reference and whole."""
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        temporal, address = start_temporal(root)
        try:
            for chars in (20, 20_000):
                for mode, inline in (("by reference", 64_000), ("whole", 0)):
                    grown, stored = growth_run(address, root, turns, chars, inline)
                    runs.append({"result_chars": chars, "mode": mode, "per_turn": grown,
                                 "total": sum(grown), "stored": stored})  # fmt: skip
                    print(json.dumps(runs[-1]), file=sys.stderr)
        finally:
            temporal.terminate()
            temporal.wait(30)
    return {"turns": turns, "cpus": os.cpu_count(), "runs": runs}


def growth_markdown(data: dict[str, Any]) -> str:
    turns = data["turns"]
    marks = [k for k in (1, 5, 10, 20, 40, 80) if k <= turns]
    lines = [
        "| tool result | history sent | " + " | ".join(f"turn {k}" for k in marks)
        + f" | all {turns} turns | per turn | store |",
        "|---|---|" + "---:|" * (len(marks) + 3),
    ]  # fmt: skip
    for r in data["runs"]:
        cells = " | ".join(f"{r['per_turn'][k - 1]:,}" for k in marks)
        lines.append(
            f"| {r['result_chars']:,} chars | {r['mode']} | {cells} | {r['total']:,} "
            f"| {r['total'] // turns:,} | {r['stored']:,} |"
        )
    return "\n".join(lines) + "\n"


def markdown(data: dict[str, Any]) -> str:
    lines = [
        "### Conversations on Temporal beside workers on PostgreSQL",
        "",
        f"`benchmarks/temporal_bench.py`; {data['cpus']} CPUs, shared. A turn is a tool call "
        "(`Read`) and an answer from a scripted loopback model (no model time). Latency: one "
        f"conversation, {data['turns']} turns one after another. Throughput: "
        f"{data['conversations']} conversations at once, {data['messages']} messages each. "
        "CPU per turn: every process of the path (workers, front end, and the Temporal or "
        "PostgreSQL server) over both phases. Bytes per turn: Temporal's workflow history "
        "(protobuf events), or PostgreSQL's database growth.",
        "",
        "| path | workers | latency p50 / p95 ms | turns/s | throughput p50 ms | failed "
        "| CPU ms/turn | CPU s: workers / front end / server | bytes/turn | load before → after |",
        "|---|---:|---:|---:|---:|---:|---:|---|---:|---|",
    ]
    for r in data["runs"]:
        failed = sum(r["throughput_failed"].values())
        load = f"{(r['load_before'] or ['?'])[0]} → {(r['load_after'] or ['?'])[0]}"
        c = r["cpu_s"]
        cpu = f"{c['workers']} / {c.get('front', '-')} / {c['server']}"
        lines.append(
            f"| {r['path']} | {r['workers']} | {r['latency_p50_ms']} / {r['latency_p95_ms']} "
            f"| {r['throughput_turns_per_s']} | {r['throughput_p50_ms']} | {failed} "
            f"| {r['cpu_ms_per_turn']} | {cpu} | {r['bytes_per_turn']:,} | {load} |"
        )
    lines += ["", f"Total wall {data['wall_s']} s; load at the end {data['load_end']}."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer turns, 1 and 2 workers")
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--conversations", type=int, default=20)
    parser.add_argument("--messages", type=int, default=3)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--history-growth", type=int, default=0, metavar="TURNS",
                        help="measure the history's growth over TURNS turns instead")  # fmt: skip
    args = parser.parse_args()
    if args.history_growth:
        growth = history_growth(args.history_growth)
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        out = RESULTS_DIR / "temporal_history_growth.json"
        out.write_text(json.dumps(growth, indent=2) + "\n")
        print(growth_markdown(growth))
        return
    if args.quick:
        args.turns, args.conversations, args.messages, args.workers = 5, 5, 2, "1,2"
    bin_dir = pgserver.find_bin_dir()
    if bin_dir is None:
        raise SystemExit("PostgreSQL is not installed (Debian: apt-get install postgresql)")
    started = time.perf_counter()
    data: dict[str, Any] = {
        "turns": args.turns,
        "conversations": args.conversations,
        "messages": args.messages,
        "cpus": os.cpu_count(),
        "load_start": load_average(),
        "runs": [],
    }
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RETINUE_"))}
    pg = pgserver.PgServer(bin_dir, settings={"max_connections": "200"}).start()
    try:
        with (
            LoopbackOpenAIServer(turn_model(), record=False) as provider,
            tempfile.TemporaryDirectory() as tmp,
        ):
            root = Path(tmp)
            temporal, address = start_temporal(root)
            env = base | {"OPENAI_BASE_URL": provider.base_url, "OPENAI_API_KEY": "bench",
                          "RETINUE_TOKEN": TOKEN}  # fmt: skip
            try:
                for count in (int(n) for n in args.workers.split(",")):
                    for run in (
                        lambda c=count: postgres_run(c, pg, env, root, args),
                        lambda c=count: temporal_run(c, address, temporal.pid, env, root, args),
                    ):
                        data["runs"].append(run())
                        print(json.dumps(data["runs"][-1]), file=sys.stderr)
            finally:
                temporal.terminate()
                temporal.wait(30)
    finally:
        pg.stop()
    data["wall_s"] = round(time.perf_counter() - started, 1)
    data["load_end"] = load_average()
    name = "temporal_bench-quick" if args.quick else "temporal_bench"
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    (RESULTS_DIR / f"{name}.json").write_text(json.dumps(data, indent=2) + "\n")
    print(markdown(data))


if __name__ == "__main__":
    main()
