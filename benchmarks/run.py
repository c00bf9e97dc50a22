"""The one command for issue 7's benchmarks: Retinue side by side with its peers.

``uv run python benchmarks/run.py``          full mode: writes ``benchmarks/RESULTS.md`` and
                                              ``benchmarks/results/*.json`` (~10-15 min on 2 cores);
``uv run python benchmarks/run.py --quick``  reduced mode for CI (well under 2 min): writes to
                                              ``benchmarks/out/`` (ignored by git).

Peers (openai-agents, pydantic-ai, LangGraph) live in ``benchmarks/.venv-peers``: the full
mode creates it (``uv venv`` + ``uv pip install -r benchmarks/requirements-peers.txt``) when
missing; the quick mode uses it only if it already exists (CI never installs peers);
``--no-peers`` leaves them out. Every script prints one JSON line; the runner starts one
loopback OpenAI-compatible server that every framework's loopback variant talks to, runs the
frameworks in interleaved rounds (the order rotates each round), and keeps medians. Every
ratio is taken within one round (Retinue and its peer, or Retinue and the floor, measured
minutes apart at most) and the report gives the median of the per-round ratios with their
range; wall and CPU time are both kept, and the machine's load average is recorded each round.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

from _common import GRID, HERE, load_average, median, write_result
from cache import prefix_shares
from overhead import LONG_GRID, start_server
from report import render

PEER_VENV = HERE / ".venv-peers"
PEER_PYTHON = PEER_VENV / "bin" / "python"
PEERS = {
    "openai-agents": HERE / "peers" / "agents_bench.py",
    "pydantic-ai": HERE / "peers" / "pydantic_ai_bench.py",
    "langgraph": HERE / "peers" / "langgraph_bench.py",
}
# this runner's result files (results/bench_<key>.json)
KEYS = ("overhead", "cache", "sessions", "idle", "blocking", "startup")
# colleagues' result files, summarised if present
FOLDED = ("compress", "memory", "lifecycle_fuzz", "local", "local_builds", "workers")
# colleagues' Markdown fragments (results/<name>.md), included as they are
FRAGMENTS = ("workers", "responses", "compress", "cache_ttl")


def script(name: str | Path, *args: object, python: Path | str = sys.executable) -> dict[str, Any]:
    """Run one benchmark script; its last stdout line is its JSON result."""
    path = str(name) if Path(name).is_absolute() else str(HERE / name)
    argv = [str(python), path, *map(str, args)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-3:]
        raise RuntimeError(f"{Path(path).name} failed ({done.returncode}): {' | '.join(tail)}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def ensure_peers(install: bool) -> bool:
    if PEER_PYTHON.exists():
        return True
    if not install:
        return False
    print("installing peers into", PEER_VENV, flush=True)
    subprocess.run(["uv", "venv", "-q", "-p", "3.11", str(PEER_VENV)], check=True)
    req = HERE / "requirements-peers.txt"
    subprocess.run(
        ["uv", "pip", "install", "-q", "--python", str(PEER_PYTHON), "-r", str(req)], check=True
    )
    return True


def task_of(body: dict[str, Any]) -> str:
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    content = users[-1].get("content") if users else ""
    return content if isinstance(content, str) else json.dumps(content)


def overhead_rounds(p: argparse.Namespace, peers: Sequence[str]) -> dict[str, Any]:
    """Interleaved rounds of every framework on the same server; medians of the rounds."""
    server = start_server()
    runs: dict[str, list[dict[str, Any]]] = {"retinue": [], **{name: [] for name in peers}}
    cache: dict[str, Any] = {}
    loads: list[list[float]] = []
    grid = ",".join(p.grid)
    own = ",".join([*p.grid, *p.long_grid])  # Retinue and the floor only
    try:
        order = list(runs)
        for r in range(p.rounds):
            loads.append(load_average())
            for fw in order[r % len(order) :] + order[: r % len(order)]:
                common = ["--base-url", server.base_url, "--repeats", p.repeats]
                if fw == "retinue":
                    res = script(
                        "overhead.py",
                        *common,
                        "--grid",
                        own,
                        "--refs",
                        "--sdk-refs",
                        "--pairs",
                        p.pairs,
                    )
                    res["delegation"] = script("delegation.py", "--repeats", p.repeats)
                else:
                    extra = ["--delegation", 20] if fw == "openai-agents" else []
                    res = script(PEERS[fw], *common, "--grid", grid, *extra, python=PEER_PYTHON)
                runs[fw].append(res)
                if r == 0 and fw != "retinue" and "t10" in p.grid:
                    wanted = "bench turns=10 history=0 run=0"
                    bodies = [b for b in server.requests if task_of(b) == wanted]
                    wire = [json.dumps(b["messages"]) for b in bodies]
                    cache[fw] = {"framework": fw, "turns": 10, **prefix_shares(wire)}
                server.requests.clear()
                print(f"  round {r + 1}/{p.rounds}: {fw} done", flush=True)
            # what the rounds measured so far, kept should a later step fail
            write_result("overhead_rounds", {"runs": runs, "loads": loads}, HERE / "out")
    finally:
        server.close()
    return {
        "runs": runs,
        "summary": summarise(runs),
        "ratios": round_ratios(runs),
        "peer_cache": cache,
        "loads": loads,
    }


def _pairs(results: list[dict[str, Any]], labels: set[str]) -> dict[str, dict[str, float]]:
    """Per label, the medians over rounds of the (wall, CPU) pairs."""
    return {
        k: {m: median([res[k][m] for res in results if k in res]) for m in ("wall", "cpu")}
        for k in labels
    }


def summarise(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per framework and figure, the median over rounds (for the tables of absolute times)."""
    out: dict[str, Any] = {}
    for fw, results in runs.items():
        if not results:
            continue
        entry: dict[str, Any] = {"version": results[0].get("version", "")}
        for variant in ("inproc", "loopback"):
            per = [res.get(variant, {}) for res in results]
            entry[variant] = _pairs(per, {k for x in per for k in x})
        if "refs" in results[0]:
            entry["refs"] = {
                ref: _pairs([res["refs"][ref] for res in results], set(results[0]["refs"][ref]))
                for ref in results[0]["refs"]
            }
        if fw == "retinue":
            entry["delegation"] = {
                k: median([res["delegation"][k] for res in results])
                for k in ("interactive", "one_shot")
            }
        if "delegation_as_tool" in results[0]:
            entry["delegation_as_tool"] = median([res["delegation_as_tool"] for res in results])
        out[fw] = entry
    return out


def round_ratios(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Ratios taken within each round: Retinue / the fastest peer of that round, and Retinue /
    the bare-socket floor of that round; per figure, the list over rounds (wall and CPU)."""
    out: dict[str, Any] = {"peer": {"inproc": {}, "loopback": {}}, "floor": {}}
    peers = [fw for fw in runs if fw != "retinue"]
    for r, ret in enumerate(runs["retinue"]):
        if any(len(runs[fw]) <= r for fw in peers):
            break  # an unfinished round
        for variant in ("inproc", "loopback"):
            for label, mine in ret.get(variant, {}).items():
                theirs = [runs[fw][r].get(variant, {}).get(label) for fw in peers]
                theirs = [t for t in theirs if t]  # (the long grid is Retinue's and the floor's)
                if not theirs:
                    continue
                cell = out["peer"][variant].setdefault(label, {"wall": [], "cpu": []})
                for m in ("wall", "cpu"):
                    cell[m].append(mine[m] / min(t[m] for t in theirs))
        for label, pairs in ret.get("floor_pairs", {}).items():  # alternated runs
            cell = out["floor"].setdefault(label, {"wall": [], "cpu": []})
            for m in ("wall", "cpu"):
                cell[m].append(median(pairs[m]))
    return out


def session_rounds(p: argparse.Namespace) -> list[dict[str, Any]]:
    """Every (collector, scale) of ``sessions.py`` in ``p.session_rounds`` rounds, one fresh
    process each time, the scales taking turns: a slow stretch of the shared machine falls on
    1,000 and 10,000 sessions alike (their ratio is the figure). Per (collector, scale): the
    round whose median run is the median of the rounds', with every run's CPU per call and
    the first round's peak RSS (a fresh process's high-water mark)."""
    plan = [("default", n) for n in p.scales]
    plan += [(mode, n) for mode in ("serve", "off") for n in p.scales[-2:]]
    found: dict[tuple[str, int], list[dict[str, Any]]] = {key: [] for key in plan}
    for _ in range(p.session_rounds):
        for mode, n in plan:
            repeats = p.session_repeats if n >= 10_000 else p.small_repeats
            args = ["--scale", n, "--collector", mode, "--repeats", repeats]
            found[(mode, n)].append(script("sessions.py", *args)["throughput"])
    out = []
    for key in plan:
        rounds = found[key]
        middle = dict(sorted(rounds, key=lambda r: r["cpu_us_per_call"])[len(rounds) // 2])
        middle["rss_growth_peak_mib"] = rounds[0]["rss_growth_peak_mib"]
        middle["cpu_us_per_call_runs"] = [x for r in rounds for x in r["cpu_us_per_call_runs"]]
        middle["repeats"] = len(middle["cpu_us_per_call_runs"])
        out.append(middle)
    return out


def fold_others() -> dict[str, Any]:
    out = {}
    tasks = sorted(p.stem for p in (HERE / "results").glob("agent_tasks_*.json"))
    for name in (*FOLDED, *tasks):
        path = HERE / "results" / f"{name}.json"
        if path.exists():
            try:
                out[name] = json.loads(path.read_text())
            except ValueError:
                out[name] = {"error": f"{path.name} is not valid JSON"}
    for name in FRAGMENTS:
        path = HERE / "results" / f"{name}.md"
        if path.exists():
            out[f"{name}.md"] = path.read_text()
    return out


def meta(quick: bool, peers: Sequence[str]) -> dict[str, Any]:
    versions = {"retinue": version("retinue"), "openai": version("openai")}
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "mode": "quick" if quick else "full",
        "machine": f"{platform.machine()}, {os.cpu_count()} CPU(s), {platform.platform()}",
        "cpu": _cpu_name(),
        "python": platform.python_version(),
        "versions": versions,
        "peers": list(peers),
    }


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def params(quick: bool) -> argparse.Namespace:
    if quick:
        return argparse.Namespace(
            rounds=1,
            repeats=1,
            pairs=1,
            grid=["t100", "t10", "h10", "h200"],
            long_grid=[],
            scales=[1, 100],
            session_rounds=1,
            session_repeats=1,
            small_repeats=1,
            idle=100,
            startup=2,
            blocking=20,
        )
    return argparse.Namespace(
        rounds=5,
        repeats=3,
        pairs=7,
        grid=list(GRID),
        long_grid=list(LONG_GRID),
        scales=[1, 100, 1000, 10000],
        session_rounds=3,
        session_repeats=1,
        small_repeats=3,
        idle=10000,
        startup=11,
        blocking=100,
    )


def rewrite_report() -> None:
    """RESULTS.md again from the last full run's files and the colleagues' result files."""
    results: dict[str, Any] = {}
    for key in KEYS:
        path = HERE / "results" / f"bench_{key}.json"
        if not path.exists():  # a figure this run did not make yet
            continue
        data = json.loads(path.read_text())
        results["meta"] = data["meta"]
        results[key] = data[key]
    results["others"] = fold_others()
    (HERE / "RESULTS.md").write_text(render(results))
    print(f"wrote {HERE / 'RESULTS.md'} from results/", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description="Retinue benchmarks side by side with peers")
    parser.add_argument("--quick", action="store_true", help="reduced mode for CI")
    parser.add_argument("--no-peers", action="store_true", help="Retinue only")
    parser.add_argument("--rounds", type=int, help="override the number of interleaved rounds")
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="rewrite RESULTS.md from the result files already in results/ (no measuring)",
    )
    args = parser.parse_args()
    if args.report_only:
        rewrite_report()
        return
    p = params(args.quick)
    if args.rounds:
        p.rounds = args.rounds
    have_peers = not args.no_peers and ensure_peers(install=not args.quick)
    peers = list(PEERS) if have_peers else []
    out_dir = HERE / "out" if args.quick else HERE / "results"
    started = time.perf_counter()
    results: dict[str, Any] = {"meta": meta(args.quick, peers)}
    if peers:
        results["meta"]["versions"].update(
            script(HERE / "peers" / "versions.py", python=PEER_PYTHON)
        )
    print("overhead and delegation ...", flush=True)
    results["overhead"] = overhead_rounds(p, peers)
    print("cache ...", flush=True)
    results["cache"] = script("cache.py")
    print("sessions ...", flush=True)
    results["sessions"] = session_rounds(p)
    results["idle"] = script("sessions.py", "--idle", p.idle)["idle"]
    print("blocking tool ...", flush=True)
    results["blocking"] = script("blocking.py", "--sessions", p.blocking)
    print("start-up ...", flush=True)
    results["startup"] = script("startup.py", "--repeats", p.startup)
    results["others"] = fold_others()
    results["meta"]["wall_s"] = time.perf_counter() - started
    results["meta"]["params"] = dict(vars(p))
    results["meta"]["load_at_end"] = load_average()
    for key in KEYS:
        write_result(f"bench_{key}", {"meta": results["meta"], key: results[key]}, out_dir)
    report = out_dir.parent / "RESULTS.md" if not args.quick else out_dir / "RESULTS.md"
    report.write_text(render(results))
    print(f"wrote {report} in {results['meta']['wall_s']:.0f} s", flush=True)


if __name__ == "__main__":
    main()
