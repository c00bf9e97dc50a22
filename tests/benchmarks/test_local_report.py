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
