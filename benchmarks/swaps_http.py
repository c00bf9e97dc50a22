"""Retinue over loopback with and without its HTTP/1.1 fast path (issue 42, item 4).

The issue's rule: keep ``retinue/llm/_http11.py`` only if, without it, Retinue's per-turn
ratio to the fastest peer over loopback HTTP (RESULTS.md 1b) would pass 0.1x. Each round
runs, in a fresh process each and in rotating order, against one ``LoopbackOpenAIServer`` in
this process (so a process's CPU figure is its client's alone):

- ``fast``: ``OpenAIModel`` as it ships (a plain-HTTP server: the lean POST first);
- ``sdk``: the same model with the fast path switched off (``_fast = None``), so every
  request goes through the ``openai`` SDK's ``client.post`` with the ready body, as it does
  for HTTPS;
- the peers of ``run.py`` (openai-agents, pydantic-ai, LangGraph) from
  ``benchmarks/.venv-peers``, loopback variant only.

Ratios are taken within each round (a Retinue variant over the fastest peer of that round,
per grid point, wall and CPU) and reported as the median of the rounds with their range; the
load average is kept for every round. With ``--floor`` each Retinue child also alternates its
100-turn runs with the bare ``http.client`` floor (the floor ratio, a target of its own).

    uv run python benchmarks/swaps_http.py [--rounds 3] [--repeats 3]

Prints one JSON line and writes ``benchmarks/results/swaps_http.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
from typing import Any

from _common import GRID, HERE, emit_json, load_average, median, write_result

PEER_PYTHON = HERE / ".venv-peers" / "bin" / "python"
PEERS = {
    "openai-agents": HERE / "peers" / "agents_bench.py",
    "pydantic-ai": HERE / "peers" / "pydantic_ai_bench.py",
    "langgraph": HERE / "peers" / "langgraph_bench.py",
}
MINE = ("fast", "sdk")


async def child(variant: str, base_url: str, repeats: int, grid: list[str], pairs: int) -> dict:
    import overhead

    from retinue.llm.openai import OpenAIModel

    model = OpenAIModel("bench", base_url=base_url, api_key="bench")
    if variant == "sdk":
        model._fast = None  # pyright: ignore[reportPrivateUsage]
    elif model._fast is None:  # pyright: ignore[reportPrivateUsage]
        raise RuntimeError("the fast path does not apply to this server")
    out: dict[str, Any] = {"framework": f"retinue-{variant}"}
    out["loopback"] = await overhead.measure(model, repeats, {k: GRID[k] for k in grid})
    if pairs:
        _, _, ratios = await overhead.paired(model, base_url, pairs, {"t100": GRID["t100"]})
        out["floor_t100"] = {m: median(ratios["t100"][m]) for m in ("wall", "cpu")}
    return out


def run_json(argv: list[str]) -> dict[str, Any]:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=1200, check=False, cwd=HERE)
    if done.returncode != 0:
        raise RuntimeError(f"{argv[1]} failed: {done.stderr.strip()[-800:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def one(name: str, args: argparse.Namespace, base_url: str) -> dict[str, Any]:
    common = ["--base-url", base_url, "--repeats", str(args.repeats), "--grid", args.grid]
    if name in MINE:
        argv = [sys.executable, __file__, "--child", name, *common, "--pairs", str(args.floor)]
        return run_json(argv)
    return run_json([str(PEER_PYTHON), str(PEERS[name]), *common, "--variants", "loopback"])


def ratios(rounds: list[dict[str, Any]], peers: list[str]) -> dict[str, Any]:
    """Per Retinue variant and grid point: the ratio to the round's fastest peer, wall and
    CPU, median over rounds with (min, max); and the per-turn medians of everyone."""
    out: dict[str, Any] = {}
    for variant in MINE:
        entry: dict[str, Any] = {}
        for label in rounds[0]["runs"][variant]["loopback"]:
            cell: dict[str, Any] = {}
            for m in ("wall", "cpu"):
                per = []
                for r in rounds:
                    fastest = min(r["runs"][p]["loopback"][label][m] for p in peers)
                    per.append(r["runs"][variant]["loopback"][label][m] / fastest)
                cell[m] = {"median": median(per), "range": [min(per), max(per)], "rounds": per}
            entry[label] = cell
        if "floor_t100" in rounds[0]["runs"][variant]:
            entry["floor_t100"] = {
                m: median([r["runs"][variant]["floor_t100"][m] for r in rounds])
                for m in ("wall", "cpu")
            }
        out[variant] = entry
    per_turn: dict[str, Any] = {}
    for name in rounds[0]["runs"]:
        labels = rounds[0]["runs"][name]["loopback"]
        per_turn[name] = {
            label: {
                m: median([r["runs"][name]["loopback"][label][m] for r in rounds])
                for m in ("wall", "cpu")
            }
            for label in labels
        }
    return {"ratio_to_fastest_peer": out, "ms_per_turn": per_turn}


def main() -> None:
    parser = argparse.ArgumentParser(description="Loopback per turn with and without _http11")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--grid", default=",".join(GRID))
    parser.add_argument("--peers", default=",".join(PEERS))
    parser.add_argument("--floor", type=int, default=5, help="floor pairs at 100 turns (0: none)")
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)
    parser.add_argument("--base-url", default="", help=argparse.SUPPRESS)
    parser.add_argument("--pairs", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--out", default="swaps_http", help="results/<OUT>.json")
    args = parser.parse_args()
    if args.child:
        grid = args.grid.split(",")
        emit_json(asyncio.run(child(args.child, args.base_url, args.repeats, grid, args.pairs)))
        return
    from overhead import start_server

    peers = args.peers.split(",")
    names = [*MINE, *peers]
    server = start_server()
    rounds: list[dict[str, Any]] = []
    try:
        for r in range(args.rounds):
            order = names[r % len(names) :] + names[: r % len(names)]
            entry: dict[str, Any] = {"order": order, "load": load_average(), "runs": {}}
            for name in order:
                entry["runs"][name] = one(name, args, server.base_url)
                server.requests.clear()
                print(f"round {r + 1}: {name} done", file=sys.stderr, flush=True)
            entry["load_after"] = load_average()
            rounds.append(entry)
    finally:
        server.close()
    result = {"rounds": rounds, **ratios(rounds, peers), "params": vars(args)}
    write_result(args.out, result)
    emit_json({k: result[k] for k in ("ratio_to_fastest_peer", "ms_per_turn")})


if __name__ == "__main__":
    main()
