"""Helpers of the MCP tests: the echo server's definition and role files."""

from __future__ import annotations

import fcntl
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from retinue.config import Settings
from retinue.llm.base import ToolSpec
from retinue.mcp.config import configured_servers
from retinue.messages import Message
from retinue.policy.trust import TrustStore
from retinue.runtime import load_roles
from retinue.testing import Step, call_tool
from retinue.tools.builtin.sandbox import BWRAP_ENV, bwrap_problem

ECHO = Path(__file__).with_name("echo_server.py")


def echo_def(marks: Path, **extra: object) -> dict[str, object]:
    return {"command": sys.executable, "args": [str(ECHO)], "env": {"ECHO_MARKS": str(marks)},
            **extra}  # fmt: skip


def role(workspace: Path, name: str, front: str, body: str = "You help.") -> None:
    agents = workspace / ".retinue" / "agents"
    agents.mkdir(parents=True, exist_ok=True)
    text = f"---\nname: {name}\ndescription: the {name} role\n{front}\n---\n{body}\n"
    (agents / f"{name}.md").write_text(text)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in state


def running(marks: Path, instance: str) -> bool:
    """Whether that start of the echo server still runs (it holds a lock while it lives;
    its PID, in a sandbox's PID namespace, means nothing out here)."""
    with open(marks / f"run-{instance}") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(f, fcntl.LOCK_UN)
        return False


def trust_all(home: Path, workspace: Path) -> int:
    """Approve every server the workspace's files define (as ``retinue mcp approve --yes``)."""
    settings = Settings.load(home=home, workspace=workspace)
    found = configured_servers(settings, load_roles(settings).roles.values())
    defs = [d for c in found if (d := c.definition()) is not None]
    TrustStore(home).approve(defs)
    return len(defs)


def painter(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Step:
    """The scripted model the MCP client tests share, by request: a one-shot sum ("sum"); a
    painter that asks which colour ("paint") and, given "teal", paints; a holder that asks
    and is never answered ("hold"); a consolidation (memorize offered) that keeps nothing."""
    if "memorize" in {t.name for t in tools}:
        return call_tool("memorize", {"block_updates": [], "new_passages": []})
    last = messages[-1].content
    if last == "teal":
        return "painted it teal"
    if last == "paint":
        return call_tool("AskParent", {"question": "Which colour?"})
    if last == "hold":
        return call_tool("AskParent", {"question": "Hold on?"})
    return "the sum is 5" if last == "sum" else f"unexpected request: {last}"


_NO_SANDBOX = bwrap_problem(os.environ.get(BWRAP_ENV) or "bwrap")
needs_sandbox = pytest.mark.skipif(
    _NO_SANDBOX is not None,
    reason=f"a server the workspace defines starts only in the sandbox: {_NO_SANDBOX}",
)
"""For a test whose server comes from the workspace (``.mcp.json``, a role's inline
``mcpServers``): without bubblewrap it is refused, by design."""
