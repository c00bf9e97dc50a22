"""Helpers of the MCP tests: the echo server's definition and role files."""

from __future__ import annotations

import sys
from pathlib import Path

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
