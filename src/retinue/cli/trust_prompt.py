"""``retinue chat`` asks, before the first turn, about each command a workspace file defines
that the user has not approved yet (see :mod:`retinue.policy.trust`): yes starts it and keeps
the approval; no (or Enter, Ctrl-D, Ctrl-C) leaves it out for this chat, and it is asked about
again next time. Off a terminal nothing is asked; the one-line report says how to approve."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from retinue.cli.term import echo, read_line
from retinue.policy.trust import Definition, printable

__all__ = ["ask_on_terminal", "ask_workspace_trust"]

MAX_SHOWN = 20_000  # the whole command, as long as a person could still read it


def ask_on_terminal(
    d: Definition, *, read: Callable[[], str] | None = None, out: TextIO | None = None
) -> bool:
    """Show ``d`` (its file, command, environment names) and ask y/N; ``True`` for yes."""
    to = out or sys.stderr
    what = "MCP server" if d.kind == "mcp" else d.kind
    env = f"\n  environment: {printable(', '.join(d.env_keys))}" if d.env_keys else ""
    echo(
        f"{printable(str(d.source))} defines {what} {printable(d.name)!r}, which runs "
        f"outside the sandbox with your rights:\n  {d.describe(limit=MAX_SHOWN)}{env}\n"
        "Start it, and remember this approval? [y/N] ",
        file=to,
        end="",
    )
    try:
        answer = read() if read is not None else read_line()
    except (EOFError, KeyboardInterrupt):
        answer = ""
        echo("", file=to)
    return answer.strip().lower() in {"y", "yes"}


def ask_workspace_trust(workspace: Path | None) -> None:
    """On a terminal, ask about every server the workspace defines that is not approved;
    the ones approved start with the chat, the others are reported and left out."""
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        return
    from retinue.config import Settings
    from retinue.mcp.config import startable
    from retinue.runtime import load_roles

    settings = Settings.load(workspace=workspace)
    startable(settings, load_roles(settings).roles.values(), ask_on_terminal)
