"""Deprecated alias of :mod:`retinue.llm.a2a` (moved there, issue 42).

Import from the new module: this alias goes in the next release.
"""

from retinue.llm.a2a import (
    MAX_REPLY,
    A2ARemote,
    RemoteAgent,
    definition,
    end_remote,
    parse_remote,
    remote_agent,
)

__all__ = [
    "MAX_REPLY",
    "A2ARemote",
    "RemoteAgent",
    "definition",
    "end_remote",
    "parse_remote",
    "remote_agent",
]
