"""The lifecycle fuzz with messages and task claims at CI size (fixed seeds): the nested
scenario's scripted models also message each other (waiting or not) and create, claim,
complete, release and reopen tasks of a real SQLite task list, under the lifecycle attacks.
The long version is ``benchmarks/team_fuzz.py``."""

from __future__ import annotations

import importlib
import sys
from collections import Counter
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
fuzz = importlib.import_module("team_fuzz")  # a script, not a package (as run.py does)
lifecycle = importlib.import_module("lifecycle_fuzz")

pytestmark = pytest.mark.timeout(300)

CLEAN = ("runs_with_orphans", "lost_consolidations", "double_consolidations", "leaked_tasks",
         "invalid_histories", "two_owners", "claimed_blocked", "completed_blocked",
         "unclear_waits")  # fmt: skip


async def test_messages_and_task_claims_leave_nothing_behind_and_claim_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a run not over after 5 s is cut and counted as hung (runs take a fraction of a second):
    # hangs are not asserted here, two known deadlocks are strict xfail tests in
    # tests/subagents/test_messaging_fuzz_findings.py; what is left after a cut is checked
    monkeypatch.setattr(lifecycle, "HANG_AFTER", 5.0)
    tallies = await fuzz.campaign(random_runs=4, seed=31, sweep_step=9)
    steps: Counter[str] = Counter()
    for name, t in tallies.items():
        assert {f: getattr(t, f) for f in CLEAN} == dict.fromkeys(CLEAN, 0), (name, t.examples)
        steps.update(t.steps)
    assert sum(t.runs for t in tallies.values()) >= 30
    # the team work bites: tasks were claimed and completed, claims were refused because
    # another had the task or a dependency was open, waits got replies and deadlock refusals
    for outcome in (
        "TaskCreate: done",
        "TaskUpdate in_progress: done",
        "TaskUpdate completed: done",
        "TaskUpdate in_progress: refused: owned by another",
        "TaskUpdate in_progress: refused: blocked",
        "SendMessage wait: replied",
        "SendMessage wait: refused: would deadlock",
        "SendMessage: delivered",
    ):
        assert steps[outcome] > 0, (outcome, steps)
