"""Deprecated alias of :mod:`retinue.mcp.server.serve` (moved there, issue 42).

Import from the new module: this alias goes in the next release.
"""

from retinue.mcp.server.serve import (
    APPROVAL_KEY,
    MAX_TASK_CHARS,
    PARENT_ID,
    Approvals,
    Clients,
    build_server,
    client_context,
)

__all__ = [
    "APPROVAL_KEY",
    "MAX_TASK_CHARS",
    "PARENT_ID",
    "Approvals",
    "Clients",
    "build_server",
    "client_context",
]
