"""The durable fuzz at CI size (fixed seeds): the nested scenario with durable sessions on,
killed ("process death") at every 7th tick and at random ticks and moments, restored by a
fresh runtime each time. The long version is ``benchmarks/durable_fuzz.py``."""

from __future__ import annotations

import importlib
import logging
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
fuzz = importlib.import_module("durable_fuzz")  # a script, not a package (as run.py does)

pytestmark = pytest.mark.timeout(300)


async def test_kills_lose_nothing_do_no_step_twice_and_leave_no_record() -> None:
    logging.getLogger("retinue").setLevel(logging.CRITICAL)  # dropped writes are expected
    try:
        tallies = await fuzz.campaign(random_runs=4, seed=30, sweep_step=9)
    finally:
        logging.getLogger("retinue").setLevel(logging.NOTSET)
    undisturbed = tallies.pop("undisturbed")
    # the whole tree ran: a, a's b, main's one-shot c that asked; six Bump and two Guarded
    # steps (one Bump more when a's background turn ended before main's steering came: the
    # steering is then a new turn)
    assert (undisturbed.sessions, undisturbed.failures) == (3, 0)
    assert undisturbed.side_effects in (8, 9)
    kills = 0
    for name, t in tallies.items():
        assert (t.hangs, t.errors, t.leaked_tasks) == (0, 0, 0), (name, t.examples)
        assert (t.lost_consolidations, t.steps_done_twice) == (0, 0), (name, t.examples)
        assert (t.invalid_histories, t.records_left) == (0, 0), (name, t.examples)
        # (a close cut between consolidation and forgetting its record: test_fuzz_findings.py)
        assert t.double_consolidations == 0, (name, t.examples)
        # (a session opened while suspend_tree lets go of its tree: test_fuzz_letgo.py)
        assert t.sessions_not_let_go == 0, (name, t.examples)
        kills += t.kills
    assert kills >= 20  # the kills happened: the checks above were not vacuous
    approvals = next(t for name, t in tallies.items() if "approvals" in name)
    assert approvals.approvals > 0  # Guarded calls asked, and were answered yes or no
