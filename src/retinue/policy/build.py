"""One process's policy, made from its settings: the mode, the rules, whether Bash is
sandboxed here, and the problems to report once."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from retinue.policy.approvals import Approver
from retinue.policy.gate import Policy
from retinue.policy.guards import Guard
from retinue.policy.hooks import Hooks
from retinue.policy.modes import PermissionMode, parse_mode
from retinue.policy.settings import SettingSource, load_permissions

__all__ = ["make_policy"]


def make_policy(
    workspace: Path,
    *,
    mode: str | None = None,
    default_mode: PermissionMode = "default",
    config_permissions: Mapping[str, Any] | None = None,
    config_mode: str | None = None,
    config_path: Path | None = None,
    approver: Approver | None = None,
    hooks: Hooks | None = None,
    user_home: Path | None = None,
    trusted: Any = None,
    sandboxed: bool | None = None,
    guards: Sequence[Guard] = (),
    sources: Collection[SettingSource] | None = None,
) -> tuple[Policy, list[str]]:
    """The policy and the problems found reading its sources (see
    :mod:`retinue.policy.settings` for the order; ``sources`` chooses among them). ``mode``
    is the caller's (a flag, an argument) and wins; ``default_mode`` is the surface's, used
    when nothing else says. ``guards`` are the program's own (:mod:`retinue.policy.guards`)."""
    found = load_permissions(
        workspace,
        config=config_permissions,
        config_path=config_path,
        config_mode=config_mode,
        user_home=user_home,
        trusted=trusted,
        sources=sources,
    )
    problems = list(found.problems)
    problems += [
        f"{path}: its allow rules and defaultMode wait for your approval "
        "(retinue mcp approve); its deny and ask rules apply"
        for path in found.untrusted
    ]
    chosen: PermissionMode = found.mode or default_mode
    if mode is not None:
        chosen, problem = parse_mode(mode, where="--permission-mode")
        if problem:
            problems.append(problem)
    policy = Policy(
        modes=(chosen,),
        rules=found.rules,
        approver=approver,
        hooks=hooks or Hooks(),
        sandboxed=sandboxed,
        guards=tuple(guards),
    )
    return policy, problems
