"""The nested interactive scenario under random cancels, interrupts, faults and delays (CI
size, fixed seeds). The long version is ``benchmarks/lifecycle_fuzz.py``."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
fuzz = importlib.import_module("lifecycle_fuzz")  # a script, not a package (as run.py does)

pytestmark = pytest.mark.timeout(120)


async def test_every_attack_leaves_nothing_behind_and_consolidates_once() -> None:
    tallies = await fuzz.campaign(random_runs=15, seed=11)
    undisturbed = tallies.pop("undisturbed")
    # the whole tree ran: a, a:x, a's b and a:x's b, each b's c, main's one-shot c that asked
    assert undisturbed.sessions == 7 and undisturbed.examples == []
    for name, t in tallies.items():
        assert (t.hangs, t.orphans, t.lost_consolidations) == (0, 0, 0), (name, t.examples)
        assert (t.double_consolidations, t.leaked_tasks) == (0, 0), (name, t.examples)
        assert t.invalid_histories == 0, (name, t.examples)
        # the attacks bite: runs were cut short, so the checks above were not vacuous
        assert t.model_calls < t.runs * undisturbed.model_calls, name
    # the approvals attack asked and answered (yes and no at random) at every depth
    approvals = next(t for name, t in tallies.items() if name.startswith("random approvals"))
    assert approvals.approvals > 0
