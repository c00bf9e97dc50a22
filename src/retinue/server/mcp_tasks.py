"""Deprecated alias of :mod:`retinue.mcp.server.tasks` (moved there, issue 42).

Import from the new module: this alias goes in the next release.
"""

from retinue.mcp.server.tasks import (
    POLL_MS,
    TASKS,
    TERMINAL,
    TTL_MS,
    Asker,
    Listener,
    Reporter,
    TaskBook,
    TaskParams,
    TaskRun,
    TasksExtension,
    Work,
)

__all__ = [
    "POLL_MS",
    "TASKS",
    "TERMINAL",
    "TTL_MS",
    "Asker",
    "Listener",
    "Reporter",
    "TaskBook",
    "TaskParams",
    "TaskRun",
    "TasksExtension",
    "Work",
]
