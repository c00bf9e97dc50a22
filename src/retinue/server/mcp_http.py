"""Deprecated alias of :mod:`retinue.mcp.server.http` (moved there, issue 42).

Import from the new module: this alias goes in the next release.
"""

from retinue.mcp.server.http import SessionOwners

__all__ = ["SessionOwners"]
