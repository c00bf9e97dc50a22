"""The embedded model's RESULTS.md section: the tiers-and-formats table is built from the
suite's and the speed benchmark's result files, one row per (model, format) run."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

local_report = importlib.import_module("local_report")


def suite(model: str, fmt: str, main: int, extra: int) -> dict[str, Any]:
    return {
        "model": model,
        "format": fmt,
        "passed": main + extra,
        "tasks": 15,
        "median_seconds": 40.5,
        "p90_seconds": 120.0,
        "median_cpu_seconds": 30.0,
        "sets": {"main": {"passed": main, "tasks": 10}, "extra": {"passed": extra, "tasks": 5}},
        "load_average": [{"before": [1.5, 2.0, 2.5], "after": [3.25, 2.0, 1.0]}],
        "results": [],
    }


def speed(model: str, rss: float) -> dict[str, Any]:
    return {
        "model": model,
        "machine": {"n_threads": 2},
        "load_s": 3.5,
        "median_first_token_s": 0.8,
        "median_decode_tokens_per_s": 14.2,
        "long_prompt": {"prompt_tokens_per_s": 90.0},
        "peak_rss_mib": rss,
    }


def test_each_model_and_format_gets_a_row_with_both_sets_and_its_models_speed() -> None:
    others = {
        "agent_tasks_local_qwen2.5_coder_1.5b_native": suite(
            "local:qwen2.5-coder-1.5b", "native", 6, 3
        ),
        "agent_tasks_local_qwen2.5_coder_0.5b_steps": suite(
            "local:qwen2.5-coder-0.5b", "steps", 2, 1
        ),
        "local": speed("local:qwen2.5-coder-0.5b", 700.0),
        "local_qwen2.5-coder-1.5b": speed("local:qwen2.5-coder-1.5b", 1500.0),
        "unrelated": {},
    }
    text = "\n".join(local_report.local_section(others))
    assert others == {"unrelated": {}}  # every file of the section is taken
    rows = [line for line in text.splitlines() if line.startswith("| `local:")]
    first = "| `local:qwen2.5-coder-0.5b` | steps | 2/10 | 1/5 | 40.5 | 120.0 | 30.0 |"
    assert rows[0].startswith(first)
    assert "| 700 |" in rows[0] and "| 1,500 |" in rows[1]
    assert rows[1].endswith("| 1.0–3.2 |")  # the lowest and highest load seen


def task(name: str, which: str, ok: bool, seconds: float, answer: str = "x") -> dict[str, Any]:
    return {
        "task": name,
        "set": which,
        "ok": ok,
        "seconds": seconds,
        "cpu_seconds": seconds / 2,
        "answer": answer,
    }


def round_file(ok_main: int, seconds: list[float], *, stopped: int = 0) -> dict[str, Any]:
    results = [task(f"m{i}", "main", i < ok_main, s) for i, s in enumerate(seconds)]
    results += [
        task(f"e{i}", "extra", False, 300.0, "stopped after 300 s (--task-limit)")
        for i in range(stopped)
    ]
    return {
        **suite("local:qwen2.5-coder-0.5b", "steps", ok_main, 0),
        "results": results,
        "load_average": [{"before": [0.5, 0.7, 0.9], "after": [2.0, 1.0, 1.0]}],
    }


def test_rounds_of_a_pair_make_one_row_with_each_rounds_passes_and_pooled_times() -> None:
    others = {
        "agent_tasks_local_qwen2.5_coder_0.5b_steps_r1": round_file(2, [10.0, 20.0, 30.0]),
        "agent_tasks_local_qwen2.5_coder_0.5b_steps_r2": round_file(3, [40.0, 50.0, 60.0]),
        "agent_tasks_local_qwen2.5_coder_0.5b_steps_r3": round_file(1, [70.0, 80.0], stopped=1),
        "agent_tasks_local_qwen2.5_coder_0.5b_steps": suite(  # an untagged run: its own table
            "local:qwen2.5-coder-0.5b", "steps", 9, 9
        ),
    }
    text = "\n".join(local_report.local_section(others))
    assert others == {}
    rows = [line for line in text.splitlines() if line.startswith("| `local:")]
    assert len(rows) == 2
    rounds = rows[0]
    # each round's passes per set, all 9 tasks pooled: median 60, p90 300 (the stopped one)
    assert rounds.startswith(
        "| `local:qwen2.5-coder-0.5b` | steps | 3 | 2/3, 3/3, 1/2 | –, –, 0/1 | 6/9 "
        "| 50.0 | 300.0 | 25.0 | 1 |"
    )
    assert rounds.endswith("| 0.5–2.0 |")
    assert rows[1].startswith("| `local:qwen2.5-coder-0.5b` | steps | 9/10 | 9/5 |")
