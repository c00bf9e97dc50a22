"""Helpers of the MCP tests: the echo server's definition and role files."""

from __future__ import annotations

import sys
from pathlib import Path

from retinue.config import Settings
from retinue.mcp.config import configured_servers
from retinue.policy.trust import TrustStore
from retinue.runtime import load_roles

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


def trust_all(home: Path, workspace: Path) -> int:
    """Approve every server the workspace's files define (as ``retinue mcp approve --yes``)."""
    settings = Settings.load(home=home, workspace=workspace)
    found = configured_servers(settings, load_roles(settings).roles.values())
    defs = [d for c in found if (d := c.definition()) is not None]
    TrustStore(home).approve(defs)
    return len(defs)
