"""Deny rules as the sandbox's own mounts: what no sandboxed command may read or change.

Claude Code's sandbox turns Read and Edit deny rules into filesystem restrictions; so does
Retinue's. A ``Read(…)`` deny rule's paths are hidden from every sandboxed command (an empty
folder, or a file that reads as nothing), an ``Edit(…)`` deny rule's are mounted read-only,
so ``cat secrets/key.txt``, ``cp``, ``sed -i`` or ``echo >`` from the ``Bash`` tool meet the
same rule the file tools do. A rule names paths by pattern; the mounts need the paths
themselves, so each rule's fixed folder (the start of its pattern, where the rule was written:
the whole workspace for a bare name such as ``*.env``) is walked when a command starts, without
following links, up to :data:`MAX_ENTRIES` entries. A walk that
reaches the limit is reported (:attr:`RulePaths.complete` false) and the command is refused
rather than run with rules it cannot keep.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from retinue.policy.modes import EDIT_TOOLS
from retinue.policy.rules import Rule
from retinue.tools.builtin.sandbox import RulePaths

__all__ = ["MAX_ENTRIES", "rule_paths"]

MAX_ENTRIES = 200_000
"""Directory entries one command's walk may look at, over all rules."""

_READ = frozenset({"Read", "Glob", "Grep", "LS", "NotebookRead"})
_REGEX_SPECIAL = frozenset(".^$*+?{}[]|()")


def rule_paths(deny: Iterable[Rule], workspace: Path) -> RulePaths:
    """The paths of ``deny``'s Read and Edit rules that exist now (see the module text).
    ``workspace`` is the command's; each rule keeps the anchor it was written with, so a
    worktree's command meets the rules of the workspace they were written for."""
    del workspace  # (see above: the rules' own anchors decide)
    budget = [MAX_ENTRIES]
    hidden: dict[Path, None] = {}
    read_only: dict[Path, None] = {}
    for rule in deny:
        regex = rule._regex  # pyright: ignore[reportPrivateUsage]  (the rule's own matcher)
        if rule.spec in (None, "", "*") or regex is None:
            continue
        if rule.tool in _READ:
            into = hidden
        elif rule.tool == "Edit" or rule.tool in EDIT_TOOLS:
            into = read_only
        else:
            continue
        for path in _matching(regex, _fixed_prefix(regex), budget):
            into[path] = None
    return RulePaths(tuple(hidden), tuple(read_only), budget[0] > 0)


def _fixed_prefix(regex: re.Pattern[str]) -> Path:
    """The folder a rule's pattern starts in: the literal start of its regular expression (a
    rule's patterns are absolute, anchored where the rule was written, so a worktree or
    sub-agent workspace elsewhere still meets them), up to its last ``/``."""
    literal: list[str] = []
    text, i = regex.pattern, 0
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text) and not text[i + 1].isalnum():
            literal.append(text[i + 1])
            i += 2
        elif char in _REGEX_SPECIAL:
            break
        else:
            literal.append(char)
            i += 1
    head = "".join(literal)
    if head.endswith("/") or not os.path.isabs(head):
        return Path(head or "/")
    return Path(head).parent if not _exact(regex, head) else Path(head)


def _exact(regex: re.Pattern[str], head: str) -> bool:
    return regex.fullmatch(head) is not None or regex.fullmatch(head + "/") is not None


def _matching(regex: re.Pattern[str], top: Path, budget: list[int]) -> list[Path]:
    """Paths at or below ``top`` that ``regex`` matches (a folder's not walked into), by a
    walk that follows no link and spends ``budget``."""
    found: list[Path] = []
    if _hit(regex, str(top)):
        return [top] if top.exists() and not top.is_symlink() else []
    stack = [str(top)]
    while stack and budget[0] > 0:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        budget[0] -= len(entries)
        for entry in entries:
            if entry.is_symlink():
                continue  # (what it points to is judged where it lies)
            if _hit(regex, entry.path):
                found.append(Path(entry.path))
            elif entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
    return found


def _hit(regex: re.Pattern[str], path: str) -> bool:
    return regex.fullmatch(path) is not None or regex.fullmatch(path + "/") is not None
