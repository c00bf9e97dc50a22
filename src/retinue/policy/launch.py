"""Where the programs that definitions name start: hooks and stdio MCP servers.

Approving a definition (:mod:`retinue.policy.trust`) approves its text, not what it runs: an
approved ``python tools/server.py`` or ``make lint`` runs whatever the workspace holds at
that moment, and the agent's sandboxed ``Bash`` may have rewritten it (or a ``json.py`` it
imports, a ``Makefile``, ``package.json``, ``node_modules/.bin``...). No list of files can
name everything a command may load, so the program itself is confined. Each definition has a
:data:`Placement`:

``"sandbox"``
    a definition a workspace file holds (``.mcp.json``, ``.claude/settings*.json``, a role
    file under the workspace): it starts inside the ``Bash`` tool's sandbox
    (:meth:`~retinue.tools.builtin.sandbox.Sandbox.wrap`, with the network), so it has the
    agent's own powers and no more. Where bubblewrap cannot run it does not start: a
    :class:`~retinue.errors.PolicyError` of one line says why and names ``retinue doctor``.
``"own"``
    the user's own (``~/.claude/settings.json``, ``config.toml``, a role file outside the
    workspace, code): inside the same sandbox, since what it runs (``npm run lint``) may be
    the workspace's. Where bubblewrap cannot run it starts on the host as before, and a
    warning says so once per process.
``"outside"``
    the user's own, and the user's own ``config.toml`` trusts it to run outside the sandbox
    (:func:`placement_of`, ``[sandbox] trusted_outside``; never a workspace file): on the
    host with the user's rights, yet in a PID namespace of its own
    (:func:`~retinue.tools.builtin.sandbox.lifetime_wrap`), so it cannot see Retinue's
    processes (nor ``/proc/<pid>/environ``) and nothing it starts outlives it.

Inside and outside alike the program runs in a PID namespace that dies with its first
process and with Retinue (``--die-with-parent``): a ``setsid`` child is killed when the hook
ends, times out or is cancelled, and when Retinue is killed. Its environment is the caller's
to choose; callers give :func:`~retinue.tools.builtin.sandbox.safe_environment` plus the
definition's own values, never the provider keys.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from retinue.errors import PolicyError
from retinue.tools.builtin.sandbox import RulePaths, Sandbox, bwrap_problem, lifetime_wrap

__all__ = ["Launch", "Placement", "Started", "placement_of"]

log = logging.getLogger("retinue.policy.launch")

Placement = Literal["sandbox", "own", "outside"]
"""Where a definition's program may start (see the module text)."""

_warned: set[str] = set()


def placement_of(kind: str, name: str, own: bool, trusted_outside: Collection[str]) -> Placement:
    """The placement of a ``kind`` (``"hook"`` / ``"mcp"``) definition named ``name``;
    ``own``: the user's own file or code defines it (no approval needed); ``trusted_outside``:
    the user's ``config.toml`` ``[sandbox] trusted_outside`` list
    (:class:`~retinue.config.SandboxSettings`: ``hooks``, ``mcp``, ``mcp:<name>``). A
    workspace's definition is always ``"sandbox"``, whatever the list says."""
    if not own:
        return "sandbox"
    listed = {"hooks"} if kind == "hook" else {"mcp", f"mcp:{name}"}
    return "outside" if listed & set(trusted_outside) else "own"


@dataclass(frozen=True, slots=True)
class Started:
    """The command line to start, and what to call exactly once after the process ended."""

    argv: list[str]
    release: Callable[[], None]


def _nothing() -> None:
    return None


@dataclass(frozen=True, slots=True)
class Launch:
    """Starts programs for ``workspace``: its sandbox hides ``data_dir`` and the user's
    secrets, as the ``Bash`` tool's does."""

    workspace: Path
    data_dir: Path
    environ: Mapping[str, str] | None = None  # for the sandbox's settings; None: os.environ
    mounts: RulePaths | None = None  # what deny rules keep from it, as from the Bash tool

    def start(
        self, argv: Sequence[str], placement: Placement, *, cwd: Path | None = None
    ) -> Started:
        """The command line that runs ``argv`` (in ``cwd``, default the workspace) where
        ``placement`` says. A :class:`PolicyError` (saying why, for a caller to put after
        the definition's name) when it must be confined and cannot be."""
        rules = self.mounts or RulePaths()
        box = Sandbox.for_workspace(
            self.workspace, self.data_dir, self.environ or os.environ,
            denied=rules.hidden, read_only=rules.read_only,
        )  # fmt: skip
        if placement == "outside":
            return Started(lifetime_wrap(argv, box.bwrap), _nothing)
        problem = bwrap_problem(box.bwrap)
        if problem is None:
            where = Path(cwd or self.workspace)
            if where.resolve() != box.workspace:  # bwrap starts it in the workspace
                argv = ["env", "-C", str(where), "--", *argv]
            return Started(box.wrap(argv, network=True), box.release)
        if placement == "sandbox":
            raise PolicyError(
                "the workspace defines it, so it runs only in the sandbox, and "
                f"{problem} (see `retinue doctor`)"
            )
        if problem not in _warned:
            _warned.add(problem)
            log.warning("your own hooks and MCP servers run unconfined: %s (see `retinue "
                        "doctor`)", problem)  # fmt: skip
        return Started(lifetime_wrap(argv, box.bwrap), _nothing)
