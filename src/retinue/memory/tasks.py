"""Deprecated alias of :mod:`retinue.store.tasks` (moved there, issue 42).

Import from the new module: this alias goes in the next release.
"""

from retinue.store.tasks import (
    MAX_DESCRIPTION_CHARS,
    MAX_SUBJECT_CHARS,
    MAX_TASKS,
    KeepsTasks,
    PgTasks,
    SQLiteTasks,
    Task,
    TaskConflictError,
    TaskStatus,
    TaskStore,
    decide,
    task_store,
)

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
