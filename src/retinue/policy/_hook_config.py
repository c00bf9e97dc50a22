"""Reading Claude Code's ``hooks`` settings into :class:`HookCommand` entries.

The shape (settings JSON, a role's ``hooks`` front matter, or ``[hooks]`` in config.toml)::

    {"PreToolUse": [{"matcher": "Bash|Edit",
                     "hooks": [{"type": "command", "command": "...", "timeout": 60}]}]}

An entry that is malformed (an unknown event, a matcher that is not a valid pattern, a hook
without a command, a type other than ``command``) is reported with its file and skipped; the
others stay.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from retinue.policy.launch import Placement

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "EVENTS",
    "MAX_TIMEOUT_S",
    "HookCommand",
    "parse_hooks",
]

EVENTS = frozenset(
    {
        "PreToolUse",
        "PostToolUse",
        "UserPromptSubmit",
        "Stop",
        "SubagentStart",
        "SubagentStop",
        "PreCompact",
        "SessionStart",
        "SessionEnd",
        "Notification",
    }
)
"""The events Retinue fires (Claude Code's others are reported as not supported)."""

_CLAUDE_ONLY = frozenset(
    {"PermissionRequest", "PermissionDenied", "PostToolUseFailure", "TaskCreated",
     "TaskCompleted", "TeammateIdle", "StopFailure", "CwdChanged", "ConfigChange",
     "InstructionsLoaded", "WorktreeCreate", "WorktreeRemove", "Elicitation",
     "ElicitationResult", "PostCompact", "FileChanged", "UserPromptExpansion"}
)  # fmt: skip
DEFAULT_TIMEOUT_S = 60.0
MAX_TIMEOUT_S = 600.0
MAX_COMMAND_CHARS = 20_000
MAX_MATCHER_CHARS = 500
MAX_MATCHED_CHARS = 200  # of a value a pattern is searched in (a model names its tools)
MAX_ENTRIES = 200  # hook commands one source may define
_SIMPLE = re.compile(r"^[\w|]+$")  # Claude Code: only names and '|' is a list of exact names


@dataclass(frozen=True, slots=True)
class HookCommand:
    """One command hook: the event it runs at, its matcher, the command, its timeout and
    the file (or setting) that defines it, and its place there (``index``); ``placement``:
    where it may run (:mod:`retinue.policy.launch`; the loader sets it)."""

    event: str
    matcher: str
    command: str
    timeout: float = DEFAULT_TIMEOUT_S
    source: Path | None = None
    index: int = 0
    _names: frozenset[str] | None = field(default=None, compare=False, repr=False)
    _regex: re.Pattern[str] | None = field(default=None, compare=False, repr=False)
    placement: Placement = "own"

    @property
    def name(self) -> str:
        """How approvals and listings name it: ``PreToolUse:Bash#0``."""
        return f"{self.event}:{self.matcher or '*'}#{self.index}"

    def matches(self, value: str | None) -> bool:
        """Whether it runs for ``value`` (a tool name, a source, ...; ``None``: always)."""
        if value is None or (self._names is None and self._regex is None):
            return True
        if self._names is not None:
            return value in self._names
        assert self._regex is not None
        return self._regex.search(value[:MAX_MATCHED_CHARS]) is not None


def _compile(matcher: str) -> tuple[frozenset[str] | None, re.Pattern[str] | None]:
    """``*`` or empty: everything; names joined by ``|``: exactly those; otherwise a regular
    expression searched in the value (``mcp__github__.*``, ``Notebook.*``)."""
    text = matcher.strip()
    if text in ("", "*"):
        return None, None
    if _SIMPLE.match(text):
        return frozenset(p for p in text.split("|") if p), None
    return None, re.compile(text)


def parse_hooks(
    section: object,
    where: str,
    *,
    source: Path | None = None,
    renames: Mapping[str, str] | None = None,
) -> tuple[list[HookCommand], list[str]]:
    """The command hooks of one ``hooks`` section, and a line for each problem found.

    ``renames`` maps an event as written to the one it becomes (a role's ``Stop`` hooks
    become ``SubagentStop``)."""
    problems: list[str] = []
    found: list[HookCommand] = []
    if section is None:
        return found, problems
    if not isinstance(section, Mapping):
        return found, [f"{where}: 'hooks' must be an object of events"]
    for event, groups in section.items():
        event_name = str(event)
        if event_name not in EVENTS:
            why = "is not supported by Retinue" if event_name in _CLAUDE_ONLY else "is unknown"
            problems.append(f"{where}: hooks event {event_name[:80]!r} {why}; skipped")
            continue
        if not isinstance(groups, list):
            problems.append(f"{where}: hooks.{event_name} must be a list; skipped")
            continue
        target = (renames or {}).get(event_name, event_name)
        for at, group in enumerate(groups):
            found.extend(_group(group, target, f"{where}: hooks.{event_name}[{at}]", problems,
                                source, len(found)))  # fmt: skip
    if len(found) > MAX_ENTRIES:
        problems.append(f"{where}: more than {MAX_ENTRIES} hooks; only the first are used")
        found = found[:MAX_ENTRIES]
    return found, problems


def _group(
    group: object,
    event: str,
    where: str,
    problems: list[str],
    source: Path | None,
    first: int,
) -> list[HookCommand]:
    if not isinstance(group, Mapping):
        problems.append(f"{where}: must be an object with 'hooks'; skipped")
        return []
    matcher = group.get("matcher", "")
    if not isinstance(matcher, str) or len(matcher) > MAX_MATCHER_CHARS:
        problems.append(f"{where}: 'matcher' must be a string (at most {MAX_MATCHER_CHARS}); "
                        "skipped")  # fmt: skip
        return []
    try:
        names, regex = _compile(matcher)
    except re.error as exc:
        problems.append(f"{where}: matcher {matcher[:80]!r} is not a valid pattern ({exc}); "
                        "skipped")  # fmt: skip
        return []
    hooks = group.get("hooks")
    if not isinstance(hooks, list):
        problems.append(f"{where}: 'hooks' must be a list of hooks; skipped")
        return []
    out: list[HookCommand] = []
    for i, hook in enumerate(hooks):
        here = f"{where}.hooks[{i}]"
        checked = _command(hook, here, problems)
        if checked is not None:
            command, timeout = checked
            out.append(HookCommand(event, matcher, command, timeout, source, first + len(out),
                                   names, regex))  # fmt: skip
    return out


def _command(hook: object, where: str, problems: list[str]) -> tuple[str, float] | None:
    if not isinstance(hook, Mapping):
        problems.append(f"{where}: must be an object; skipped")
        return None
    kind = hook.get("type", "command")
    if kind != "command":
        problems.append(f"{where}: hooks of type {str(kind)[:40]!r} are not supported (only "
                        "'command'); skipped")  # fmt: skip
        return None
    command = hook.get("command")
    if not isinstance(command, str) or not command.strip():
        problems.append(f"{where}: 'command' must be a non-empty string; skipped")
        return None
    if len(command) > MAX_COMMAND_CHARS:
        problems.append(f"{where}: 'command' is longer than {MAX_COMMAND_CHARS} characters; "
                        "skipped")  # fmt: skip
        return None
    timeout: Any = hook.get("timeout", DEFAULT_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        problems.append(f"{where}: 'timeout' must be a positive number of seconds; "
                        f"{DEFAULT_TIMEOUT_S:g} is used")  # fmt: skip
        timeout = DEFAULT_TIMEOUT_S
    if timeout > MAX_TIMEOUT_S:
        problems.append(f"{where}: 'timeout' {timeout:g} s is capped at {MAX_TIMEOUT_S:g} s")
        timeout = MAX_TIMEOUT_S
    return command, float(timeout)
