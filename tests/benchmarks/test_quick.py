"""Smoke test of the Retinue-only benchmark parts in a tiny mode: they run and measure what
they claim (no timing assertions; figures live in ``benchmarks/RESULTS.md``)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

# the benchmark scripts are not a package: import them from their folder, as run.py does
blocking = importlib.import_module("blocking")
cache = importlib.import_module("cache")
delegation = importlib.import_module("delegation")
overhead = importlib.import_module("overhead")
runner = importlib.import_module("run")
sessions = importlib.import_module("sessions")
report = importlib.import_module("report")
render = report.render


async def test_overhead_in_process_runs_every_grid_point() -> None:
    grid = {"t10": (10, 0), "h10": (3, 10)}
    out = await overhead.measure(overhead.inproc_model(), 1, grid)
    assert set(out) == {"t10", "h10"}
    assert all(v["wall"] > 0 and v["cpu"] > 0 for v in out.values())


async def test_overhead_over_loopback_and_references() -> None:
    server = overhead.start_server()
    try:
        model = overhead.OpenAIModel("bench", base_url=server.base_url, api_key="bench")
        mine, floor, ratios = await overhead.paired(model, server.base_url, 2, {"t3": (3, 2)})
    finally:
        server.close()
    assert mine["t3"]["wall"] > 0 and floor["t3"]["wall"] > 0 and floor["t3"]["cpu"] >= 0
    # one ratio per pair, each Retinue's run over the floor's run next to it
    assert len(ratios["t3"]["wall"]) == len(ratios["t3"]["cpu"]) == 2
    assert all(r > 0 for r in ratios["t3"]["wall"])
    # warm-up and two pairs, each a 3-turn run and the floor's 3 requests
    assert server.request_count == 3 * (3 + 3)


async def test_delegation_interactive_and_one_shot() -> None:
    out = await delegation.measure(turns=3, repeats=1)
    assert set(out) == {"interactive", "one_shot"}


async def test_sessions_throughput_and_idle_memory() -> None:
    t = await sessions.throughput(20, turns=2, delay=0.001)
    assert t["model_calls"] == 40 and t["live_sessions_before_cleanup"] == 20
    assert t["cpu_us_per_call"] > 0
    idle = await sessions.idle_memory(10, history_turns=3)
    assert idle["sessions"] == 10
    assert idle["messages_per_session"] == 1 + 2 * 3
    assert idle["message_bytes_per_session"] > 0 and idle["bytes_per_session"] > 0
    # the history's own objects are more than its UTF-8 text, and less than everything held
    held, own = idle["bytes_per_session"], idle["message_objects_per_session"]
    assert idle["message_bytes_per_session"] < own < held
    assert idle["beyond_messages_per_session"] == pytest.approx(held - own)


async def test_blocking_tools_run_in_the_pool_while_the_loop_goes_on() -> None:
    out = await blocking.measure(sessions=4, block_ms=20, probe_ms=2)
    assert out["sessions"] == 4 and out["threads"] >= 1
    assert out["probes"] > 0  # the probe kept waking up while the tools blocked
    assert out["ideal_wall_s"] <= out["inline_wall_s"]


def test_ratios_are_taken_within_each_round() -> None:
    """A round where everything ran 4x slower must not tilt the ratio (the old report divided
    the median of all rounds by round 1's floor); within a round, the floor ratio is the
    median of the alternated pairs' ratios (one odd pair does not move it)."""

    def pair(v: float) -> dict[str, float]:
        return {"wall": v, "cpu": v / 2}

    def pairs(r: float, f: float) -> dict[str, list[float]]:  # three alternated pairs
        return {"wall": [r / f, 9.0, r / f], "cpu": [r / f, r / f, 0.1]}

    rounds = [(4.0, 2.0, 80.0), (1.0, 0.5, 20.0), (1.0, 0.5, 20.0)]  # retinue, floor, peer
    runs = {
        "retinue": [  # t400: Retinue and the floor only
            {
                "loopback": {"t100": pair(r), "t400": pair(r)},
                "refs": {"http_client": {"t100": pair(f), "t400": pair(f)}},
                "floor_pairs": {"t100": pairs(r, f), "t400": pairs(r, f)},
            }
            for r, f, _ in rounds
        ],
        "peer": [{"loopback": {"t100": pair(p)}} for _, _, p in rounds],
    }
    ratios = runner.round_ratios(runs)
    assert ratios["floor"]["t100"]["wall"] == [2.0, 2.0, 2.0]
    assert ratios["floor"]["t100"]["cpu"] == [2.0, 2.0, 2.0]
    assert ratios["peer"]["loopback"]["t100"]["wall"] == [0.05, 0.05, 0.05]
    assert ratios["floor"]["t400"]["cpu"] == [2.0, 2.0, 2.0]
    assert "t400" not in ratios["peer"]["loopback"]


def test_growth_with_history_is_taken_beyond_the_floors_own() -> None:
    """Over loopback, 200 seeded messages are 20 times the bytes on the wire for the floor
    too: Retinue's growth counts only beyond the floor's in the same round."""

    def res(mine: tuple[float, float], floor: tuple[float, float]) -> dict[str, Any]:
        def grid(pair: tuple[float, float]) -> dict[str, dict[str, float]]:
            return {"h10": {"cpu": pair[0]}, "h200": {"cpu": pair[1]}}

        return {"loopback": grid(mine), "refs": {"http_client": grid(floor)}}

    rounds = [res((1.0, 2.0), (1.0, 2.0)), res((1.0, 3.0), (1.0, 1.5)), res((2.0, 2.2), (1.0, 1.0))]
    found = report._growth_beyond_floor({"overhead": {"runs": {"retinue": rounds}}})
    assert found is not None
    beyond, _, mine, floor = found
    assert beyond == pytest.approx(1.1)  # the rounds' 1.0, 2.0 and 1.1
    assert mine == pytest.approx(2.0) and floor == pytest.approx(1.5)
    assert report._growth_beyond_floor({"overhead": {}}) is None


async def test_cache_prefix_share_of_an_interactive_session() -> None:
    out = await cache.measure(turns=3)
    assert out["requests"] == 6
    assert out["kept_min"] == pytest.approx(1.0)


async def test_a_forks_first_request_repeats_the_parents_previous_request() -> None:
    out = await cache.measure_fork(turns=2)
    assert out["fork"]["kept"] == 1.0 and out["fork"]["request_kept"] == 1.0
    assert out["fork"]["tools_same"] and not out["plain"]["tools_same"]
    assert out["plain"]["kept"] < 0.5


def test_prefix_shares_detects_a_rerendered_system_prompt() -> None:
    stable = cache.prefix_shares(['[{"a":1}]', '[{"a":1},{"b":2}]'])
    broken = cache.prefix_shares(['[{"t":1},{"a":1}]', '[{"t":2},{"a":1},{"b":2}]'])
    assert stable["kept_min"] == 1.0
    assert broken["kept_min"] < 0.5


def test_report_renders_without_peers() -> None:
    fig = {k: {"wall": 1.0, "cpu": 1.0} for k in ("t100", "t10", "h10", "h200")}
    results = {
        "meta": {
            "date": "d",
            "mode": "quick",
            "machine": "m",
            "cpu": "c",
            "python": "3",
            "versions": {"retinue": "0"},
        },
        "overhead": {
            "summary": {
                "retinue": {
                    "inproc": fig,
                    "loopback": fig,
                    "delegation": {"interactive": 1, "one_shot": 1},
                }
            }
        },
        "cache": {"requests": 2, "kept_min": 1.0, "kept_mean": 1.0, "cached_mean": 0.9},
        "sessions": [
            {
                "sessions": 1,
                "turns": 5,
                "model_calls": 5,
                "wall_s": 1,
                "calls_per_s": 5,
                "ideal_calls_per_s": 50,
                "rss_growth_peak_mib": 0,
            }
        ],
        "idle": {
            "sessions": 1,
            "history_turns": 20,
            "messages_per_session": 41,
            "bytes_per_session": 2,
            "message_bytes_per_session": 1,
            "ratio": 2.0,
            "left_after_unload_bytes": 0,
            "leak_second_round_bytes": 0,
            "leak_per_session_bytes": 0,
            "traced_peak_mib": 0,
            "build_s": 0,
        },
        "startup": {
            "import_retinue": {
                "command": "python -c import retinue",
                "median_s": 0.1,
                "min_s": 0.1,
                "returncode": 0,
                "error": [],
            }
        },
    }
    results["others"] = {"workers.md": "### Workers\n\n| a |", "workers": {"x": 1}}
    text = render(results)
    assert "\n## Workers\n\n| a |" in text  # a colleague's fragment, as its own section
    assert "results/workers.json" not in text  # (not listed again)
    assert "no peers" in text
    assert "idle session memory vs its message text (UTF-8) | ≤ 2× | 2.00× | met" in text


def test_confinement_measures_every_way_of_starting_a_command() -> None:
    from retinue.tools.builtin.sandbox import bwrap_problem

    if bwrap_problem() is not None:
        pytest.skip(f"no sandbox here: {bwrap_problem()}")
    confinement = importlib.import_module("confinement")
    out = confinement.measure(1)
    ways = out["per_start"]
    assert set(ways) == {"plain", "lifetime", "sandbox", "sandbox_net", "sandbox_rules"}
    assert all(w["wall_ms"] > 0 for w in ways.values())
    assert ways["plain"]["wall_x_plain"] == 1.0
