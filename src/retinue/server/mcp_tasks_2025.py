"""Deprecated alias of :mod:`retinue.mcp.server.tasks_2025` (moved there, issue 42).

Import from the new module: this alias goes in the next release.
"""

from retinue.mcp.server.tasks_2025 import (
    LEGACY,
    PROGRESS_BURST,
    PROGRESS_CHARS,
    RELATED_TASK,
    BothTasks,
    legacy_view,
)

__all__ = ["LEGACY", "PROGRESS_BURST", "PROGRESS_CHARS", "RELATED_TASK", "BothTasks", "legacy_view"]
