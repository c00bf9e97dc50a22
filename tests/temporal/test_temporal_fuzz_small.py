"""The Temporal kill fuzz at CI size (one fixed seed): workers and front ends SIGKILLed at
random mid-turn, and still no step twice, no turn lost or doubled, no orphan workflow.
The long version is ``benchmarks/temporal_fuzz.py``."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

pytest.importorskip("temporalio", reason="the temporal extra (temporalio) is not installed")

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
fuzz = importlib.import_module("temporal_fuzz")  # a script, not a package

pytestmark = pytest.mark.timeout(400)  # a hang bound: 30-35 s on a loaded machine


async def test_kills_of_workers_and_front_ends_leave_every_count_at_zero(
    temporal_address: str, tmp_path: Path
) -> None:
    result = await fuzz.run(
        temporal_address, tmp_path, seed=7, workers=2, fronts=2, conversations=2, messages=2,
        kills=3,
    )  # fmt: skip
    assert {k: result[k] for k in fuzz.BAD} == dict.fromkeys(fuzz.BAD, 0), result
    assert sum(result["kills"].values()) == 3
    assert result["steps_run"] >= 1  # (a step may be cut short before its side effect)
