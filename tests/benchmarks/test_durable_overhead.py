"""The durable overhead benchmark in a tiny mode (SQLite only): it runs both modes and the
off mode records nothing (no timing assertions; figures live in ``benchmarks/RESULTS.md``)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
overhead = importlib.import_module("durable_overhead")  # a script, not a package


async def test_both_modes_run_and_only_on_records(tmp_path: Path) -> None:
    result = await overhead.on_store("sqlite", None, [3], 2, tmp_path)
    assert result["off_check"] == {"on_step_hook": False, "records_written": 0}
    for pair in ("on-vs-off", "off-vs-off"):
        figures = result["3_steps"][pair]
        assert figures["wall"]["first_ms_per_step"] > 0 and figures["cpu"]["second_ms_per_step"] > 0


async def test_an_on_session_is_recorded_at_every_step(tmp_path: Path) -> None:
    store = overhead.open_store(tmp_path / "home", None)
    try:
        await overhead.one_session(store, "s1", 4, tmp_path)
        recorded = await store.journal.load(overhead.TENANT, "s1")
        assert recorded is not None
        record, messages = recorded
        assert record.state == "idle" and record.turns == 1
        assert len(messages) == 1 + 2 * 4 + 1  # the message, 4 calls and results, the answer
    finally:
        store.close()
