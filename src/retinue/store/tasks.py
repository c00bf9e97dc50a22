"""The shared task list of a parent tree (a "team"), stored in the memory database.

Tasks carry an id (1, 2, … per team), a subject, a description, an owner, a status
(``pending``, ``in_progress``, ``completed``) and the ids of the tasks they wait for. What an
update may do is decided by one pure function, :func:`decide`, from the task and its
dependencies as read *inside the writing transaction*: SQLite's ``BEGIN IMMEDIATE`` (one
writer at a time, across threads and processes), PostgreSQL's ``SELECT … FOR UPDATE`` on the
task's row (and a per-team advisory lock when a task is created, for its id). So claiming a
task — taking an unowned pending task whose dependencies are completed — is atomic: of two
claimers, one gets it and the other is told who has it.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, cast, get_args, runtime_checkable

from retinue.errors import MemoryStoreError
from retinue.store.plumbing import PgConnects, SQLiteRead, SQLiteTx

__all__ = [
    "MAX_DESCRIPTION_CHARS",
    "MAX_SUBJECT_CHARS",
    "MAX_TASKS",
    "KeepsTasks",
    "PgTasks",
    "SQLiteTasks",
    "Task",
    "TaskConflictError",
    "TaskStatus",
    "TaskStore",
    "decide",
    "task_store",
]

TaskStatus = Literal["pending", "in_progress", "completed"]
STATUSES: tuple[str, ...] = get_args(TaskStatus)
MAX_SUBJECT_CHARS = 200
MAX_DESCRIPTION_CHARS = 4_000
MAX_TASKS = 500  # per team
MAX_DEPENDENCIES = 20


class TaskConflictError(MemoryStoreError):
    """An update the task's state refuses (owned by another, blocked, unknown, completed)."""


@dataclass(frozen=True, slots=True)
class Task:
    id: int
    subject: str
    description: str
    status: TaskStatus
    owner: str | None
    blocked_by: tuple[int, ...]
    updated_at: float


def check_new(subject: str, description: str, blocked_by: Sequence[int]) -> None:
    if not subject.strip():
        raise MemoryStoreError("a task needs a subject")
    if len(subject) > MAX_SUBJECT_CHARS or len(description) > MAX_DESCRIPTION_CHARS:
        raise MemoryStoreError(
            f"a task's subject is at most {MAX_SUBJECT_CHARS} characters and its description "
            f"{MAX_DESCRIPTION_CHARS:,}: shorten it, or put the details in a file"
        )
    if len(blocked_by) > MAX_DEPENDENCIES:
        raise MemoryStoreError(f"a task waits for at most {MAX_DEPENDENCIES} others")


def check_ids(known: Sequence[int], blocked_by: Sequence[int]) -> None:
    if len(known) >= MAX_TASKS:
        raise MemoryStoreError(f"this team's task list is full ({MAX_TASKS} tasks)")
    missing = sorted(set(blocked_by) - set(known))
    if missing:
        raise TaskConflictError(f"no task {', '.join(f'#{i}' for i in missing)} in this list")


def decide(
    task: Task,
    deps: dict[int, str],
    actor: str,
    status: str | None,
    owner: str | None,
) -> tuple[str | None, TaskStatus]:
    """The (owner, status) ``actor`` may set on ``task`` (``owner=""`` releases it), or a
    :class:`TaskConflictError` saying why not. ``deps``: the status of each dependency."""
    if status is not None and status not in STATUSES:
        raise MemoryStoreError(f"unknown status {status!r}: use one of {', '.join(STATUSES)}")
    if task.owner is not None and task.owner != actor:
        raise TaskConflictError(f"task #{task.id} is owned by {task.owner}; leave it to them")
    new_owner = task.owner if owner is None else (owner.strip() or None)
    new_status = cast("TaskStatus", status or task.status)
    if owner == "" and status is None and task.status == "in_progress":
        new_status = "pending"  # released: someone else may claim it
    if new_status == "in_progress" and new_owner is None:
        new_owner = actor  # starting it claims it
    if new_status == "completed" and new_owner is None:
        new_owner = actor
    taking = (new_owner is not None and new_owner != task.owner) or (
        new_status == "in_progress" and task.status != "in_progress"
    )
    if taking and task.status == "completed" and new_status != "pending":
        raise TaskConflictError(f"task #{task.id} is already completed")
    finishing = new_status == "completed" and task.status != "completed"
    if taking or finishing:  # (a dependency reopened since it was taken: not done yet)
        waiting = [f"#{i} ({s})" for i, s in sorted(deps.items()) if s != "completed"]
        if waiting:
            raise TaskConflictError(f"task #{task.id} is blocked by {', '.join(waiting)}")
    return new_owner, new_status


def _task(row: Sequence[object]) -> Task:
    tid, subject, description, status, owner, blocked, at = row
    return Task(
        int(cast("int", tid)),
        str(subject),
        str(description),
        cast("TaskStatus", status),
        cast("str | None", owner),
        tuple(json.loads(str(blocked))),
        float(cast("float", at)),
    )


_COLUMNS = "id, subject, description, status, owner, blocked_by, updated_at"
_OWNED_SQLITE = (  # what a session that ends leaves: its unfinished tasks
    "SELECT id FROM tasks WHERE tenant = ? AND team = ? AND owner = ? AND status != 'completed'"
)


class SQLiteTasks:
    """The task lists in a :class:`~retinue.store.sqlite.SQLiteStore`'s database."""

    def __init__(
        self,
        tx: SQLiteTx,
        read: SQLiteRead,
    ) -> None:
        self._tx, self._read = tx, read

    async def create(
        self, tenant: str, team: str, subject: str, description: str, blocked_by: Sequence[int]
    ) -> Task:
        return await asyncio.to_thread(self._create, tenant, team, subject, description,
                                       tuple(blocked_by))  # fmt: skip

    def _create(
        self, tenant: str, team: str, subject: str, description: str, blocked: tuple[int, ...]
    ) -> Task:
        check_new(subject, description, blocked)
        with self._tx() as conn:
            known = [r[0] for r in conn.execute(
                "SELECT id FROM tasks WHERE tenant = ? AND team = ?", (tenant, team))]  # fmt: skip
            check_ids(known, blocked)
            row = (max(known, default=0) + 1, subject.strip(), description, "pending", None,
                   json.dumps(sorted(set(blocked))), time.time())  # fmt: skip
            conn.execute(
                f"INSERT INTO tasks (tenant, team, {_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (tenant, team, *row),
            )
        return _task(row)

    async def list(self, tenant: str, team: str) -> list[Task]:
        rows = await asyncio.to_thread(self._read, f"SELECT {_COLUMNS} FROM tasks "
                                       "WHERE tenant = ? AND team = ? ORDER BY id",
                                       (tenant, team))  # fmt: skip
        return [_task(r) for r in rows]

    async def get(self, tenant: str, team: str, task_id: int) -> Task | None:
        rows = await asyncio.to_thread(self._read, f"SELECT {_COLUMNS} FROM tasks "
                                       "WHERE tenant = ? AND team = ? AND id = ?",
                                       (tenant, team, task_id))  # fmt: skip
        return _task(rows[0]) if rows else None

    async def update(
        self,
        tenant: str,
        team: str,
        task_id: int,
        *,
        actor: str,
        status: str | None = None,
        owner: str | None = None,
    ) -> Task:
        return await asyncio.to_thread(self._update, tenant, team, task_id, actor, status, owner)

    def _update(
        self, tenant: str, team: str, task_id: int, actor: str, status: str | None,
        owner: str | None,
    ) -> Task:  # fmt: skip
        with self._tx() as conn:  # read, decide and write under the write lock
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM tasks WHERE tenant = ? AND team = ?", (tenant, team)
            ).fetchall()
            tasks = {t.id: t for t in map(_task, rows)}
            task = tasks.get(task_id)
            if task is None:
                raise TaskConflictError(f"no task #{task_id} in this list")
            deps = {i: tasks[i].status for i in task.blocked_by if i in tasks}
            new_owner, new_status = decide(task, deps, actor, status, owner)
            at = time.time()
            conn.execute(
                "UPDATE tasks SET owner = ?, status = ?, updated_at = ? "
                "WHERE tenant = ? AND team = ? AND id = ?",
                (new_owner, new_status, at, tenant, team, task_id),
            )
        return Task(task.id, task.subject, task.description, new_status, new_owner,
                    task.blocked_by, at)  # fmt: skip

    async def release(self, tenant: str, team: str, owner: str) -> list[int]:
        return await asyncio.to_thread(self._release, tenant, team, owner)

    def _release(self, tenant: str, team: str, owner: str) -> list[int]:
        with self._tx() as conn:
            ids = [r[0] for r in conn.execute(_OWNED_SQLITE, (tenant, team, owner))]
            conn.executemany(
                "UPDATE tasks SET owner = NULL, status = 'pending', updated_at = ? "
                "WHERE tenant = ? AND team = ? AND id = ?",
                [(time.time(), tenant, team, i) for i in ids],
            )
        return ids


class PgTasks:
    """The task lists in a :class:`~retinue.store.postgres.PostgresStore`'s database."""

    def __init__(self, store: PgConnects) -> None:
        self.store = store

    async def create(
        self, tenant: str, team: str, subject: str, description: str, blocked_by: Sequence[int]
    ) -> Task:
        blocked = tuple(blocked_by)
        check_new(subject, description, blocked)
        async with self.store.connection() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))",
                               (f"retinue-tasks:{tenant}:{team}",))  # fmt: skip
            cur = await conn.execute(
                "SELECT id FROM tasks WHERE tenant = %s AND team = %s", (tenant, team)
            )
            known = [int(r[0]) for r in await cur.fetchall()]
            check_ids(known, blocked)
            row = (max(known, default=0) + 1, subject.strip(), description, "pending", None,
                   json.dumps(sorted(set(blocked))), time.time())  # fmt: skip
            await conn.execute(
                f"INSERT INTO tasks (tenant, team, {_COLUMNS}) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (tenant, team, *row),
            )
        return _task(row)

    async def list(self, tenant: str, team: str) -> list[Task]:
        async with self.store.connection() as conn:
            cur = await conn.execute(
                f"SELECT {_COLUMNS} FROM tasks WHERE tenant = %s AND team = %s ORDER BY id",
                (tenant, team),
            )
            return [_task(r) for r in await cur.fetchall()]

    async def get(self, tenant: str, team: str, task_id: int) -> Task | None:
        async with self.store.connection() as conn:
            cur = await conn.execute(
                f"SELECT {_COLUMNS} FROM tasks WHERE tenant = %s AND team = %s AND id = %s",
                (tenant, team, task_id),
            )
            row = await cur.fetchone()
        return _task(row) if row else None

    async def update(
        self,
        tenant: str,
        team: str,
        task_id: int,
        *,
        actor: str,
        status: str | None = None,
        owner: str | None = None,
    ) -> Task:
        async with self.store.connection() as conn, conn.transaction():
            cur = await conn.execute(  # the row stays locked until this transaction ends
                f"SELECT {_COLUMNS} FROM tasks WHERE tenant = %s AND team = %s AND id = %s "
                "FOR UPDATE",
                (tenant, team, task_id),
            )
            row = await cur.fetchone()
            if row is None:
                raise TaskConflictError(f"no task #{task_id} in this list")
            task = _task(row)
            deps: dict[int, str] = {}
            if task.blocked_by:
                cur = await conn.execute(
                    "SELECT id, status FROM tasks WHERE tenant = %s AND team = %s AND id = ANY(%s)",
                    (tenant, team, list(task.blocked_by)),
                )
                deps = {int(i): str(s) for i, s in await cur.fetchall()}
            new_owner, new_status = decide(task, deps, actor, status, owner)
            at = time.time()
            await conn.execute(
                "UPDATE tasks SET owner = %s, status = %s, updated_at = %s "
                "WHERE tenant = %s AND team = %s AND id = %s",
                (new_owner, new_status, at, tenant, team, task_id),
            )
        return Task(task.id, task.subject, task.description, new_status, new_owner,
                    task.blocked_by, at)  # fmt: skip

    async def release(self, tenant: str, team: str, owner: str) -> list[int]:
        async with self.store.connection() as conn, conn.transaction():
            cur = await conn.execute(
                "UPDATE tasks SET owner = NULL, status = 'pending', updated_at = %s "
                "WHERE tenant = %s AND team = %s AND owner = %s AND status != 'completed' "
                "RETURNING id",
                (time.time(), tenant, team, owner),
            )
            return sorted(int(r[0]) for r in await cur.fetchall())


@runtime_checkable
class TaskStore(Protocol):
    """The shared task lists of parent trees ("teams"), at a
    store's ``tasks``. ``update`` decides and writes in one transaction: claims are atomic."""

    async def create(
        self, tenant: str, team: str, subject: str, description: str, blocked_by: Sequence[int]
    ) -> Task: ...

    async def list(self, tenant: str, team: str) -> list[Task]: ...

    async def get(self, tenant: str, team: str, task_id: int) -> Task | None: ...

    async def update(
        self,
        tenant: str,
        team: str,
        task_id: int,
        *,
        actor: str,
        status: str | None = None,
        owner: str | None = None,
    ) -> Task: ...

    async def release(self, tenant: str, team: str, owner: str) -> list[int]:
        """Put the tasks ``owner`` holds and did not complete back (pending, unowned): the
        ids released. A session's end does this, so its tasks do not stay claimed."""
        ...


@runtime_checkable
class KeepsTasks(Protocol):
    """A store that also keeps the teams' task lists (both of Retinue's stores do; a
    program's own :class:`~retinue.memory.base.Memory` need not)."""

    @property
    def tasks(self) -> TaskStore: ...


def task_store(memory: object) -> TaskStore | None:
    """The task lists of a store (a memory backend), if it keeps them."""
    tasks = memory.tasks if isinstance(memory, KeepsTasks) else None
    return tasks if isinstance(tasks, TaskStore) else None
