"""The shared task list (issue 31, item 2) on both stores: create, list, get, update; a claim
is atomic (50 concurrent claimers, two stores on one database, two threads on one SQLite
file: exactly one owner); dependencies block a claim until they are completed."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from retinue.errors import MemoryStoreError
from retinue.memory import MemoryBackend, open_memory
from retinue.store.tasks import Task, TaskConflictError, TaskStore

pytestmark = pytest.mark.timeout(60)


def team() -> str:  # PostgreSQL's tables are shared by the tests of a session
    return f"main-{uuid.uuid4().hex[:8]}"


def tasks_of(store: MemoryBackend) -> TaskStore:
    tasks = store.tasks
    assert isinstance(tasks, TaskStore)
    return tasks


async def claim(tasks: TaskStore, t: str, task_id: int, actor: str) -> Task | None:
    try:
        return await tasks.update("default", t, task_id, actor=actor, status="in_progress")
    except TaskConflictError:
        return None


async def test_create_list_get_update(store: MemoryBackend) -> None:
    tasks, t = tasks_of(store), team()
    first = await tasks.create("default", t, "write the parser", "in src/parse.py", [])
    second = await tasks.create("default", t, "test the parser", "", [first.id])
    assert (first.id, second.id) == (1, 2) and second.blocked_by == (1,)
    assert [(x.id, x.status, x.owner) for x in await tasks.list("default", t)] == [
        (1, "pending", None),
        (2, "pending", None),
    ]
    got = await tasks.get("default", t, 1)
    assert got is not None and got.description == "in src/parse.py"
    assert await tasks.get("default", t, 3) is None
    assert await tasks.list("other-tenant", t) == []  # tenants do not share lists
    done = await tasks.update("default", t, 1, actor="main/a", status="completed")
    assert (done.status, done.owner) == ("completed", "main/a")
    with pytest.raises(TaskConflictError, match="no task #7"):
        await tasks.create("default", t, "x", "", [7])
    with pytest.raises(MemoryStoreError, match="unknown status"):
        await tasks.update("default", t, 2, actor="main/a", status="done")
    with pytest.raises(MemoryStoreError, match="needs a subject"):
        await tasks.create("default", t, "  ", "", [])


async def test_fifty_concurrent_claims_give_one_owner(store: MemoryBackend) -> None:
    tasks, t = tasks_of(store), team()
    await tasks.create("default", t, "the one task", "", [])
    got = await asyncio.gather(*(claim(tasks, t, 1, f"main/w:{n}") for n in range(50)))
    winners = [g for g in got if g is not None]
    assert len(winners) == 1
    stored = await tasks.get("default", t, 1)
    assert stored is not None and (stored.owner, stored.status) == (
        winners[0].owner,
        "in_progress",
    )
    with pytest.raises(TaskConflictError, match=f"owned by {winners[0].owner}"):
        await tasks.update("default", t, 1, actor="main/late", status="completed")


async def test_claims_through_two_stores_on_one_database(
    new_store: Callable[..., MemoryBackend],
) -> None:
    """Two workers (two stores, two connection pools or files handles), one owner."""
    a, b, t = tasks_of(new_store()), tasks_of(new_store()), team()
    await a.create("default", t, "shared", "", [])
    got = await asyncio.gather(*(claim(a if n % 2 else b, t, 1, f"main/w:{n}") for n in range(20)))
    assert sum(g is not None for g in got) == 1


def test_two_threads_on_one_sqlite_file_give_one_owner(tmp_path: Path) -> None:
    t = team()
    setup = open_memory(tmp_path)
    asyncio.run(setup.tasks.create("default", t, "shared", "", []))
    setup.close()

    def worker(n: int) -> int:
        store = open_memory(tmp_path)  # its own connection
        try:
            got = asyncio.run(_claims(store.tasks, t, n))
        finally:
            store.close()
        return got

    with ThreadPoolExecutor(2) as pool:
        wins = list(pool.map(worker, range(2)))
    assert sum(wins) == 1
    check = open_memory(tmp_path)
    (task,) = asyncio.run(check.tasks.list("default", t))
    check.close()
    assert task.owner is not None and task.owner.startswith("main/t")


async def _claims(tasks: TaskStore, t: str, n: int) -> int:
    got = await asyncio.gather(*(claim(tasks, t, 1, f"main/t{n}:{k}") for k in range(10)))
    return sum(g is not None for g in got)


async def test_dependencies_block_a_claim_until_completed(store: MemoryBackend) -> None:
    tasks, t = tasks_of(store), team()
    await tasks.create("default", t, "design", "", [])
    await tasks.create("default", t, "build", "", [1])
    with pytest.raises(TaskConflictError, match=r"blocked by #1 \(pending\)"):
        await tasks.update("default", t, 2, actor="main/b", status="in_progress")
    with pytest.raises(TaskConflictError, match="blocked by"):  # taking it by owner too
        await tasks.update("default", t, 2, actor="main/b", owner="main/b")
    await tasks.update("default", t, 1, actor="main/a", status="in_progress")
    with pytest.raises(TaskConflictError, match=r"blocked by #1 \(in_progress\)"):
        await tasks.update("default", t, 2, actor="main/b", status="in_progress")
    await tasks.update("default", t, 1, actor="main/a", status="completed")
    built = await tasks.update("default", t, 2, actor="main/b", status="in_progress")
    assert (built.owner, built.status) == ("main/b", "in_progress")


async def test_release_lets_another_claim(store: MemoryBackend) -> None:
    tasks, t = tasks_of(store), team()
    await tasks.create("default", t, "flaky", "", [])
    await tasks.update("default", t, 1, actor="main/a", status="in_progress")
    released = await tasks.update("default", t, 1, actor="main/a", owner="")
    assert (released.owner, released.status) == (None, "pending")
    taken = await claim(tasks, t, 1, "main/b")
    assert taken is not None and taken.owner == "main/b"


async def test_release_puts_back_only_the_owners_unfinished_tasks(store: MemoryBackend) -> None:
    """A session that ends leaves the tasks it held unfinished (started, or given to it)
    pending and unowned; what it completed and what another holds stay as they are."""
    tasks, t = tasks_of(store), team()
    for subject in ("a", "b", "c", "d"):
        await tasks.create("default", t, subject, "", [])
    await tasks.update("default", t, 1, actor="main/x", status="in_progress")
    await tasks.update("default", t, 2, actor="main/x", status="completed")
    await tasks.update("default", t, 3, actor="main/y", status="in_progress")
    await tasks.update("default", t, 4, actor="main/lead", owner="main/x")  # given, not begun
    assert await tasks.release("default", t, "main/x") == [1, 4]
    assert [(x.status, x.owner) for x in await tasks.list("default", t)] == [
        ("pending", None),
        ("completed", "main/x"),
        ("in_progress", "main/y"),
        ("pending", None),
    ]
    assert await tasks.release("default", t, "main/x") == []  # twice is once
    assert await tasks.release("other-tenant", t, "main/y") == []
    assert (await tasks.get("default", t, 3)).status == "in_progress"  # type: ignore[union-attr]
