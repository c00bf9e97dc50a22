"""Conversations on Temporal under SIGKILL of random workers and front ends, mid-turn.

Run: ``uv run python benchmarks/temporal_fuzz.py [--quick] [--seeds N]``. Writes
``benchmarks/results/temporal_fuzz.json`` (``temporal_fuzz-quick.json`` with ``--quick``).

One run: a Temporal dev server, ``--workers`` ``retinue worker --temporal`` processes and
``--fronts`` ``retinue serve --temporal`` front ends, all real processes. ``--conversations``
clients each send ``--messages`` messages, one after another, each through a random live
front end with an ``Idempotency-Key``; a request that fails (its front end died, 5xx) is sent
again with the same key through another. Every turn is one ``Bash`` call that appends the
turn's key to a ledger file and then sleeps (a step with a side effect, not idempotent),
then an answer naming the message. Meanwhile a killer SIGKILLs a random worker or front end
(its whole process group) every 0.3 to 1.5 s, ``--kills`` times, and starts a new one in
its place. The workflows are started with a heartbeat timeout of 1 s, so a dead worker's
call is noticed quickly.

Counted after every run, all of which must be 0:

* **steps done twice**: a key more than once in the ledger (a killed worker's call is told
  to the model as cut short, never run again);
* **turns twice / lost**: a message not exactly once in its conversation's history, or a
  client that got no answer naming its message (a retried request joins its turn);
* **invalid histories** (:func:`~retinue.messages.history_problems`);
* **orphan workflows**: a workflow still running on the task queue ``ORPHAN_GRACE`` (30) s
  after every conversation was deleted through a front end (the workers alive meanwhile);
* **hangs**: a client still waiting after ``HANG_AFTER`` seconds;
* **crashes**: a worker or front end that died without being killed (it is replaced, as a
  process manager would, and its log kept in the results).

Lost consolidations are not counted here: in this slice no sub-agent session outlives its
tool call (each is consolidated inside the call's activity); sessions as child workflows
come with their own test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
from _common import RESULTS_DIR, load_average
from temporal_bench import start_temporal
from temporalio.client import Client, WorkflowExecutionStatus

from retinue.llm.base import ToolSpec
from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.messages import Message, ToolResultMessage, UserMessage, history_problems
from retinue.temporal._types import Limits
from retinue.temporal.client import TemporalConversations
from retinue.testing import ScriptedModel, call_tool

HANG_AFTER = 150.0
ORPHAN_GRACE = 30.0  # seconds a deleted conversation's workflows may take to finish
TOKEN = "fuzz-token"


def fuzz_model(ledger: Path) -> ScriptedModel:
    """The turn's ``Bash`` step on a user message; after its result, the answer."""

    def respond(messages: Sequence[Message], _tools: Sequence[ToolSpec]) -> Any:
        asked = next(m for m in reversed(messages) if isinstance(m, UserMessage)).content
        if isinstance(messages[-1], ToolResultMessage):
            return f"done {asked}"
        key = asked.split()[-1]
        return call_tool("Bash", {"command": f"echo {key} >> {ledger} && sleep 0.4"})

    return ScriptedModel(responder=respond, record=False)


@dataclass(slots=True)
class Fleet:
    """The workers and front ends of one run: :meth:`kill_one` replaces one at random,
    :meth:`revive` one that died by itself (a crash: counted, its log kept)."""

    address: str
    queue: str
    root: Path
    env: dict[str, str]
    rng: random.Random
    workers: list[subprocess.Popen[str]] = field(default_factory=list)
    fronts: list[tuple[subprocess.Popen[str], str]] = field(default_factory=list)
    killed: Counter[str] = field(default_factory=Counter)
    crashed: Counter[str] = field(default_factory=Counter)
    crash_logs: list[str] = field(default_factory=list)
    logs: dict[int, Path] = field(default_factory=dict)

    def _spawn(self, kind: str, args: list[str]) -> subprocess.Popen[str]:
        log = self.root / "logs" / f"{kind}-{len(self.logs)}.log"
        log.parent.mkdir(exist_ok=True)
        with log.open("w") as out:  # (a file, not a pipe nobody reads: a write never blocks)
            proc = subprocess.Popen(
                [sys.executable, "-m", "retinue", *args], env=self.env, cwd=self.root,
                text=True, start_new_session=True, stdout=subprocess.DEVNULL, stderr=out,
            )  # fmt: skip
        self.logs[proc.pid] = log
        return proc

    def worker(self) -> None:
        self.workers.append(self._spawn("worker", [
            "worker", "--temporal", self.address, "--task-queue", self.queue, "-m",
            "openai:fuzz", "-q", "--permission-mode", "bypassPermissions"]))  # fmt: skip

    def front(self) -> None:
        proc = self._spawn("front", ["serve", "--temporal", self.address, "--task-queue",
                                     self.queue, "--port", "0"])  # fmt: skip
        deadline = time.monotonic() + 60
        while not (line := self.logs[proc.pid].read_text().partition("\n")[0]).startswith(
            "retinue serving"
        ):  # fmt: skip
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the front end did not start: {self.tail(proc)}")
            time.sleep(0.05)
        self.fronts.append((proc, line.split()[-1]))

    def tail(self, proc: subprocess.Popen[str]) -> str:
        return self.logs[proc.pid].read_text(errors="replace")[-1500:]

    def urls(self) -> list[str]:
        return [url for proc, url in self.fronts if proc.poll() is None]

    async def kill_one(self) -> None:
        kind = self.rng.choice(["worker", "front"])
        if kind == "worker":
            victim = self.workers.pop(self.rng.randrange(len(self.workers)))
        else:
            victim = self.fronts.pop(self.rng.randrange(len(self.fronts)))[0]
        _kill(victim)
        self.killed[kind] += 1
        await asyncio.to_thread(self.worker if kind == "worker" else self.front)

    async def revive(self) -> None:
        """Replace every process that died without being killed here."""
        for proc in [p for p in self.workers if p.poll() is not None]:
            self.workers.remove(proc)
            self.crashed["worker"] += 1
            self.crash_logs.append(self.tail(proc))
            await asyncio.to_thread(self.worker)
        for entry in [f for f in self.fronts if f[0].poll() is not None]:
            self.fronts.remove(entry)
            self.crashed["front"] += 1
            self.crash_logs.append(self.tail(entry[0]))
            await asyncio.to_thread(self.front)

    def stop(self) -> None:
        for proc in [*self.workers, *(p for p, _ in self.fronts)]:
            _kill(proc)


def _kill(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


async def run(
    address: str,
    root: Path,
    *,
    seed: int,
    workers: int = 3,
    fronts: int = 2,
    conversations: int = 4,
    messages: int = 3,
    kills: int = 6,
) -> dict[str, Any]:
    """One fuzz run against the Temporal server at ``address``; its counts."""
    rng = random.Random(seed)
    await asyncio.to_thread(root.mkdir, parents=True, exist_ok=True)
    ledger = root / "ledger.txt"
    queue = f"fuzz-{seed}-{os.getpid()}-{time.monotonic_ns()}"
    client = await Client.connect(address)
    limits = replace(Limits(), heartbeat_s=1.0, model_attempts=30, tool_attempts=30)
    convs = TemporalConversations(client, task_queue=queue, limits=limits)
    cids = [f"f{c}-{time.monotonic_ns() % 10**8}" for c in range(conversations)]  # (a run its own)
    for cid in cids:  # (the front ends then use these runs: a heartbeat timeout of 1 s)
        await convs.start(cid)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RETINUE_"))}
    answers: dict[str, list[str]] = {cid: [] for cid in cids}
    hung = running = 0
    with LoopbackOpenAIServer(fuzz_model(ledger), record=False) as provider:
        env = base | {"OPENAI_BASE_URL": provider.base_url, "OPENAI_API_KEY": "fuzz",
                      "RETINUE_TOKEN": TOKEN, "RETINUE_HOME": str(root / "home"),
                      "RETINUE_BLOCK_REAL_MODELS": "1"}  # fmt: skip
        fleet = Fleet(address, queue, root, env, rng)
        try:
            await asyncio.gather(
                *(asyncio.to_thread(fleet.worker) for _ in range(workers)),
                *(asyncio.to_thread(fleet.front) for _ in range(fronts)),
            )

            async def killer() -> None:
                for _ in range(kills):
                    await asyncio.sleep(rng.uniform(0.3, 1.5))
                    await fleet.kill_one()
                    await fleet.revive()

            async def supervisor() -> None:  # (as a process manager would)
                while True:
                    await fleet.revive()
                    await asyncio.sleep(0.5)

            async def user(cid: str, http: httpx.AsyncClient) -> None:
                for k in range(messages):
                    text = f"task {cid}-{k}"
                    while True:
                        urls = fleet.urls()
                        try:
                            r = await http.post(
                                f"{rng.choice(urls)}/v1/conversations/{cid}/messages",
                                json={"content": text},
                                headers={"Idempotency-Key": f"{cid}-{k}"},
                            )
                            if r.status_code == 200:
                                answers[cid].append(r.json()["content"])
                                break
                        except (httpx.HTTPError, IndexError):
                            pass  # (its front end died, or none is up yet: another)
                        await asyncio.sleep(0.2)

            auth = {"Authorization": f"Bearer {TOKEN}"}
            async with httpx.AsyncClient(headers=auth, timeout=HANG_AFTER) as http:
                users = [asyncio.ensure_future(user(cid, http)) for cid in cids]
                kill = asyncio.ensure_future(killer())
                watch = asyncio.ensure_future(supervisor())
                try:
                    _, pending = await asyncio.wait(users, timeout=HANG_AFTER)
                    hung = len(pending)
                    for task in pending:
                        task.cancel()
                    await kill
                    histories = {cid: await convs.history(cid) for cid in cids}
                    for cid in cids:
                        await _delete(http, fleet, rng, cid)
                    running = await _still_running(client, convs, cids, queue)
                finally:
                    watch.cancel()
                    await asyncio.gather(watch, return_exceptions=True)
        finally:
            fleet.stop()
    keys = ledger.read_text().split() if ledger.exists() else []
    twice_turns = lost_turns = invalid = 0
    for cid, history in histories.items():
        users = Counter(m.content for m in history if isinstance(m, UserMessage))
        for k in range(messages):
            seen = users[f"task {cid}-{k}"]
            twice_turns += seen > 1
            lost_turns += seen == 0
        invalid += bool(history_problems(history))
    wrong = sum(answers[cid] != [f"done task {cid}-{k}" for k in range(messages)] for cid in cids)
    return {
        "seed": seed,
        "steps_twice": sum(n > 1 for n in Counter(keys).values()),
        "turns_twice": twice_turns,
        "turns_lost": lost_turns,
        "wrong_answers": wrong,
        "invalid_histories": invalid,
        "orphan_workflows": running,
        "hangs": hung,
        "steps_run": len(set(keys)),
        "turns": conversations * messages,
        "kills": dict(fleet.killed),
        "crashes": sum(fleet.crashed.values()),
        "crash_logs": fleet.crash_logs[:3],
    }


async def _delete(http: httpx.AsyncClient, fleet: Fleet, rng: random.Random, cid: str) -> None:
    """Delete ``cid`` through a live front end (retried: one may be starting), for a while."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            url = rng.choice(fleet.urls())
            if (await http.delete(f"{url}/v1/conversations/{cid}")).is_success:
                return
        except (httpx.HTTPError, IndexError):
            pass
        await asyncio.sleep(0.2)


async def _still_running(
    client: Client, convs: TemporalConversations, cids: list[str], queue: str
) -> int:
    """The workflows of ``queue`` still running ``ORPHAN_GRACE`` seconds after every
    conversation was deleted (the workers alive meanwhile): the conversations' own
    (described) and any other, a session's child workflow say (listed)."""
    deadline = time.monotonic() + ORPHAN_GRACE
    while True:
        running = 0
        for cid in cids:
            described = await convs.handle(cid).describe()
            running += described.status == WorkflowExecutionStatus.RUNNING
        query = f"TaskQueue = '{queue}' AND ExecutionStatus = 'Running'"
        running = max(running, (await client.count_workflows(query)).count)
        if running == 0 or time.monotonic() > deadline:
            return running
        await asyncio.sleep(0.3)


BAD = ("steps_twice", "turns_twice", "turns_lost", "wrong_answers", "invalid_histories",
       "orphan_workflows", "hangs", "crashes")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 seeds, CI sizes")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--kills", type=int, default=8)
    args = parser.parse_args()
    seeds = 3 if args.quick else args.seeds
    started = time.perf_counter()
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        server, address = start_temporal(Path(tmp))
        try:
            for seed in range(seeds):
                result = asyncio.run(
                    run(address, Path(tmp) / f"run{seed}", seed=seed, kills=args.kills)
                )
                runs.append(result)
                print(json.dumps(result), file=sys.stderr)
        finally:
            server.terminate()
            server.wait(30)
    totals = {k: sum(r[k] for r in runs) for k in BAD}
    data = {
        "seeds": seeds,
        "totals": totals,
        "kills": sum(sum(r["kills"].values()) for r in runs),
        "turns": sum(r["turns"] for r in runs),
        "wall_s": round(time.perf_counter() - started, 1),
        "load_end": load_average(),
        "runs": runs,
    }
    name = "temporal_fuzz-quick" if args.quick else "temporal_fuzz"
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    (RESULTS_DIR / f"{name}.json").write_text(json.dumps(data, indent=2) + "\n")
    print(json.dumps({k: v for k, v in data.items() if k != "runs"}, indent=2))
    if any(totals.values()):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
