"""Found by the team fuzz's invariant (``benchmarks/team_fuzz.py``: no task completed while
a task it depends on is open), minimised on the store: a dependency reopened after its
dependent was claimed."""

from __future__ import annotations

from pathlib import Path

import pytest

from retinue.memory import open_memory
from retinue.store.tasks import TaskConflictError


async def test_a_task_is_not_completed_while_a_reopened_dependency_is_open(
    tmp_path: Path,
) -> None:
    store = open_memory(tmp_path / "mem")
    try:
        tasks = store.tasks
        await tasks.create("t", "main", "build", "", [])
        await tasks.create("t", "main", "ship", "", [1])
        await tasks.update("t", "main", 1, actor="a", status="completed")
        await tasks.update("t", "main", 2, actor="b", status="in_progress")  # #1 is done
        reopened = await tasks.update("t", "main", 1, actor="a", status="pending")
        assert reopened.status == "pending"
        with pytest.raises(TaskConflictError, match="blocked by #1"):
            await tasks.update("t", "main", 2, actor="b", status="completed")
    finally:
        store.close()
