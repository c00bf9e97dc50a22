"""Durable steps (issue 30, item 5): an engine (DBOS) or Retinue's own conversation store?

Run: ``uv run python benchmarks/durable_steps.py --dbos-python /path/to/venv/bin/python``
where that venv has ``dbos`` and ``psycopg[binary]`` (DBOS is *not* a Retinue dependency:
``uv venv /tmp/dbosvenv && uv pip install --python /tmp/dbosvenv/bin/python dbos
'psycopg[binary]'``). Writes ``benchmarks/results/durable_steps.json``.

**Cost per step.** A workflow of ``--steps`` steps that do nothing, each step recorded:

* *DBOS*: a ``@DBOS.workflow`` calling a ``@DBOS.step`` ``--steps`` times (DBOS checkpoints
  each step's output in its system database);
* *Retinue*: the smallest honest prototype on the store the service already has: a
  workflow is a stored conversation, each step appends one message and saves it with
  :meth:`ConversationStore.save <retinue.store.conversations.ConversationStore.save>`
  (``keep``: only the new row is written, one transaction), as the service saves a turn.

Each on SQLite (a file in a temporary folder) and on PostgreSQL (a throwaway server started
here, ``fsync=off`` as in the tests, the same for both). DBOS on SQLite runs twice: with its
defaults (rollback journal, ``synchronous=FULL``: every commit is fsynced) and, as
``sqlite-wal``, with the settings of Retinue's SQLite store (WAL, ``synchronous=NORMAL``: a
commit survives a killed process, not a power cut). Every measurement runs in a fresh
process; the figure is the median of ``--rounds`` workflows after one warm-up workflow: wall
time and this process's CPU time (all its threads), per step. The PostgreSQL server's own
CPU is not counted (the same for both).

**Recovery after SIGKILL.** A workflow of 6 steps whose steps append their number to a
side-effect log is SIGKILLed (a) between steps 3 and 4 (after step 3 was recorded), and
(b) inside step 4 (after its side effect, before it was recorded); the process is started
again and recovers the workflow (DBOS: ``DBOS.launch()`` recovers pending workflows; the
prototype: load the stored steps, go on after the last). The log shows which steps ran
twice.

**Code.** The lines (not blank, not comments) of each variant's workflow code, as counted
from this file.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RECOVERY_STEPS = 6
PAUSE_AFTER = 2  # (0-based) killed after step index 2 was recorded: between steps 3 and 4
DIE_IN = 3  # killed inside step index 3 (the 4th), after its side effect, before its record
RUNS = (  # DBOS's SQLite default fsyncs every commit; "sqlite-wal" gives it Retinue's settings
    ("dbos", "sqlite"),
    ("dbos", "sqlite-wal"),
    ("dbos", "postgresql"),
    ("retinue", "sqlite"),
    ("retinue", "postgresql"),
)


# -- the DBOS variant (runs under --dbos-python) ---------------------------------------------


def dbos_child(args: argparse.Namespace) -> dict[str, Any]:
    from dbos import DBOS, DBOSConfig, SetWorkflowID  # pyright: ignore[reportMissingImports]
    from dbos._error import DBOSNonExistentWorkflowError  # pyright: ignore[reportMissingImports]

    config: DBOSConfig = {"name": "retinue-bench", "system_database_url": args.db}
    config["log_level"] = "WARNING"
    if args.wal:  # the durability Retinue's SQLite store has: WAL, no fsync per commit
        import sqlalchemy as sa  # pyright: ignore[reportMissingImports]

        engine = sa.create_engine(args.db)

        @sa.event.listens_for(engine, "connect")
        def pragmas(conn: Any, _record: Any) -> None:
            for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "busy_timeout=30000"):
                conn.execute(f"PRAGMA {pragma}")
            conn.execute("PRAGMA foreign_keys=ON")

        config["system_database_engine"] = engine
    DBOS(config=config)
    log_path = Path(args.log) if args.log else None

    @DBOS.step()
    def step(i: int) -> int:
        if log_path is not None:
            _log(log_path, i)
            if args.die_in == i:
                _stall(args.marker)
        return i

    @DBOS.workflow()
    def workflow(n: int) -> int:
        for i in range(n):
            step(i)
            if args.pause_after == i:
                _stall(args.marker)
        return n

    DBOS.launch()  # recovers this executor's pending workflows (in threads)
    try:
        if args.recover:  # (retrieve may miss it while launch's recovery holds SQLite)
            for _ in range(100):
                try:
                    return {"result": DBOS.retrieve_workflow(args.wid).get_result()}
                except DBOSNonExistentWorkflowError:
                    time.sleep(0.1)
            raise RuntimeError(f"workflow {args.wid} not found after recovery")
        if args.log:  # the recovery scenario's first run: killed before it returns
            with SetWorkflowID(args.wid):
                return {"result": workflow(RECOVERY_STEPS)}

        def run_one(k: int) -> None:
            with SetWorkflowID(f"bench-{os.getpid()}-{k}"):
                workflow(args.steps)

        return _measure(run_one, args)
    finally:
        DBOS.destroy()


DBOS_CODE = (dbos_child,)


# -- the Retinue variant: a workflow is a stored conversation, a step one saved message ------


async def retinue_workflow(store: Any, wid: str, n: int, args: argparse.Namespace) -> int:
    """Run (or go on with) workflow ``wid``: step ``i`` is recorded as message ``i + 1``."""
    from retinue.messages import AssistantMessage, Message, UserMessage

    messages: list[Message] = await store.load("bench", wid) or [UserMessage(f"workflow {n}")]
    if len(messages) == 1:
        await store.save("bench", wid, messages)
    log_path = Path(args.log) if args.log else None
    for i in range(len(messages) - 1, n):  # the steps not recorded yet
        if log_path is not None:
            _log(log_path, i)
            if args.die_in == i:
                _stall(args.marker)
        messages.append(AssistantMessage(f"step {i}"))
        await store.save("bench", wid, messages, keep=len(messages) - 1)
        if args.pause_after == i:
            _stall(args.marker)
    return n


def retinue_child(args: argparse.Namespace) -> dict[str, Any]:
    from retinue.memory import PostgresMemory, SQLiteMemory

    async def main() -> dict[str, Any]:
        if args.db.startswith("postgresql"):
            memory: Any = PostgresMemory(args.db)
            await memory.pool()
        else:
            memory = SQLiteMemory(Path(args.db))
        store = memory.conversations
        try:
            if args.log:
                return {"result": await retinue_workflow(store, args.wid, RECOVERY_STEPS, args)}
            loop = asyncio.get_running_loop()

            def run_one(k: int) -> None:  # (in a thread: the loop stays free)
                wid = f"bench-{os.getpid()}-{k}"
                coro = retinue_workflow(store, wid, args.steps, args)
                asyncio.run_coroutine_threadsafe(coro, loop).result()

            return await asyncio.to_thread(_measure, run_one, args)
        finally:
            if isinstance(memory, PostgresMemory):
                await memory.aclose()
            else:
                memory.close()

    return asyncio.run(main())


RETINUE_CODE = (retinue_workflow, retinue_child)


# -- shared by both children -----------------------------------------------------------------


def _log(path: Path, i: int) -> None:
    with path.open("a") as f:
        f.write(f"{i}\n")


def _stall(marker: str | None) -> None:
    """Say "here" (the parent SIGKILLs this process now) and wait to be killed."""
    if marker:
        Path(marker).write_text("here")
        time.sleep(600)


def _measure(run_one: Any, args: argparse.Namespace) -> dict[str, Any]:
    run_one(-1)  # warm-up (connections, caches, the first workflow's rows)
    walls, cpus = [], []
    for k in range(args.rounds):
        w0, c0 = time.perf_counter(), time.process_time()
        run_one(k)
        walls.append((time.perf_counter() - w0) / args.steps)
        cpus.append((time.process_time() - c0) / args.steps)
    return {
        "wall_ms_per_step": round(statistics.median(walls) * 1000, 4),
        "cpu_ms_per_step": round(statistics.median(cpus) * 1000, 4),
        "rounds_wall_ms": [round(w * 1000, 4) for w in walls],
    }


def code_lines(functions: tuple[Any, ...]) -> int:
    lines = 0
    for fn in functions:
        for line in inspect.getsource(fn).splitlines():
            text = line.strip()
            if text and not text.startswith("#") and not text.startswith(('"""', "'''")):
                lines += 1
    return lines


# -- the parent: starts the children, kills them, reads the logs -----------------------------


def child(python: str, engine: str, db: str, *extra: str) -> subprocess.Popen[str]:
    cmd = [python, str(Path(__file__).resolve()), "--child", engine, "--db", db, *extra]
    env = {**os.environ, "PYTHONPATH": str(HERE.parent / "src")}
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def finish(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"child failed ({proc.returncode}): {err[-3000:]}")
    return json.loads(out.strip().splitlines()[-1])


def recovery(
    python: str, engine: str, db: str, folder: Path, how: str, wal: list[str]
) -> dict[str, Any]:
    wid = f"recover-{how}"
    name = f"{engine}-{'pg' if db.startswith('postgresql') else 'sqlite'}{len(wal)}-{how}"
    log, marker = folder / f"{name}.log", folder / f"{name}.here"
    where = ["--pause-after", str(PAUSE_AFTER)] if how == "between" else ["--die-in", str(DIE_IN)]
    first = child(python, engine, db, "--wid", wid, "--log", str(log), "--marker", str(marker),
                  *where, *wal)  # fmt: skip
    deadline = time.monotonic() + 120
    while not marker.exists():
        if first.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{engine} never reached the kill point: {first.stderr.read()}")  # type: ignore[union-attr]
        time.sleep(0.02)
    first.send_signal(signal.SIGKILL)
    first.wait()
    before = [int(x) for x in log.read_text().split()]
    again = finish(child(python, engine, db, "--wid", wid, "--log", str(log), "--recover", *wal))
    ran = [int(x) for x in log.read_text().split()]
    after = ran[len(before) :]
    return {
        "killed": "between steps 3 and 4" if how == "between" else "inside step 4",
        "ran_before_kill": [i + 1 for i in before],
        "ran_after_restart": [i + 1 for i in after],
        "ran_twice": sorted({i + 1 for i in ran if ran.count(i) > 1}),
        "finished": again.get("result") == RECOVERY_STEPS,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--child", choices=["dbos", "retinue"])
    parser.add_argument("--db", default="")
    parser.add_argument("--wid", default="")
    parser.add_argument("--log", default="")
    parser.add_argument("--marker", default="")
    parser.add_argument("--pause-after", type=int, default=-1)
    parser.add_argument("--die-in", type=int, default=-1)
    parser.add_argument("--recover", action="store_true")
    parser.add_argument("--wal", action="store_true")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dbos-python", default="")
    parser.add_argument("--out", default=str(HERE / "results" / "durable_steps.json"))
    args = parser.parse_args()
    if args.child:
        result = (dbos_child if args.child == "dbos" else retinue_child)(args)
        print(json.dumps(result))
        return
    if not args.dbos_python:
        parser.error("--dbos-python: a Python with dbos installed (see the docstring)")
    sys.path.insert(0, str(HERE.parent / "tests"))
    pgserver = importlib.import_module("pgserver")
    bin_dir = pgserver.find_bin_dir()
    if bin_dir is None:
        sys.exit("PostgreSQL is not installed")
    server = pgserver.PgServer(bin_dir).start()
    pythons = {"dbos": args.dbos_python, "retinue": sys.executable}
    results: dict[str, Any] = {"steps": args.steps, "rounds": args.rounds, "cost": {}}
    try:
        with tempfile.TemporaryDirectory(prefix="durable-steps-") as tmp:
            folder = Path(tmp)
            for engine, backend in RUNS:
                key, python = f"{engine}/{backend}", pythons[engine]
                if backend.startswith("sqlite"):
                    db_file = folder / f"{engine}-{backend}.sqlite"
                    db = f"sqlite:///{db_file}" if engine == "dbos" else str(db_file)
                else:
                    db = server.create_database(f"{engine}_bench")
                wal = ["--wal"] if backend == "sqlite-wal" else []
                size = ["--steps", str(args.steps), "--rounds", str(args.rounds), *wal]
                results["cost"][key] = finish(child(python, engine, db, *size))
                results.setdefault("recovery", {})[key] = [
                    recovery(python, engine, db, folder, how, wal) for how in ("between", "inside")
                ]
                print(key, results["cost"][key], file=sys.stderr)
    finally:
        server.stop()
    version = subprocess.run(
        [args.dbos_python, "-c", "import importlib.metadata as m; print(m.version('dbos'))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    results["code_lines"] = {"dbos": code_lines(DBOS_CODE), "retinue": code_lines(RETINUE_CODE)}
    results["machine"] = {
        "dbos_version": version,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_avg": [round(x, 2) for x in os.getloadavg()],
        "postgresql": str(bin_dir),
    }
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
