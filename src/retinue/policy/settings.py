"""Where the permission rules and the default mode come from, and the policy they make.

Read in this order (all of them count; a rule's place does not change its strength, since
deny wins over ask and ask over allow wherever each was written):

1. ``~/.claude/settings.json``: the user's own Claude Code settings;
2. Retinue's ``config.toml`` (``permission_mode`` and ``[permissions]`` ``allow`` / ``ask`` /
   ``deny``): the user's own;
3. ``<workspace>/.claude/settings.json`` and ``.claude/settings.local.json``: the project's.

A project file comes with the workspace, so it may tighten (its ``deny`` and ``ask`` rules
always apply) but it may loosen only once the user has trusted it: its ``allow`` rules and its
``defaultMode`` wait for the same approval as the workspace's commands (``retinue mcp
approve``), and until then one line says so. The mode is the first of: the caller's (a flag,
the library's argument), ``config.toml``'s, a settings file's ``defaultMode``, the surface's
default. A file that cannot be read or parsed is reported and the others still count.

``sources`` (a library agent's ``setting_sources``, as the Claude Agent SDK's) chooses which
of these apply, to the rules, the mode and the hooks alike: ``"user"`` (1 and 2),
``"project"`` (``.claude/settings.json``) and ``"local"`` (``.claude/settings.local.json``);
``None`` means all three, an empty list none.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast, get_args

from retinue.errors import ConfigError
from retinue.policy.modes import PermissionMode, parse_mode
from retinue.policy.rules import RuleSet

__all__ = [
    "PermissionSettings",
    "SettingSource",
    "load_permissions",
    "setting_sources",
    "settings_files",
]

MAX_SETTINGS_BYTES = 1_000_000

SettingSource = Literal["user", "project", "local"]
"""Where settings come from: the user's own files, the project's shared one, its local one."""


def setting_sources(sources: Collection[str] | None) -> frozenset[SettingSource] | None:
    """``sources`` checked (``None``: every source); an unknown name is a ConfigError."""
    if sources is None:
        return None
    if isinstance(sources, str):
        raise ConfigError(f"setting_sources is a list such as [{sources!r}], not a string")
    known: tuple[str, ...] = get_args(SettingSource)
    unknown = [s for s in sources if s not in known]
    if unknown:
        raise ConfigError(f"setting_sources: unknown {unknown}; use any of {list(known)}")
    return frozenset(cast("SettingSource", s) for s in known if s in sources)


@dataclass(slots=True)
class PermissionSettings:
    """The rules, the mode the files ask for (if any), and every problem found."""

    rules: RuleSet = field(default_factory=RuleSet)
    mode: PermissionMode | None = None
    problems: list[str] = field(default_factory=list)
    untrusted: list[Path] = field(default_factory=list)  # project files whose loosening waits


def settings_files(
    workspace: Path,
    user_home: Path | None = None,
    sources: Collection[SettingSource] | None = None,
) -> list[tuple[Path, bool]]:
    """Claude Code's settings files of ``sources`` (``None``: all), each with whether it
    belongs to the project."""
    claude = (user_home or Path.home()) / ".claude"
    files: list[tuple[Path, bool, SettingSource]] = [
        (claude / "settings.json", False, "user"),
        (workspace / ".claude" / "settings.json", True, "project"),
        (workspace / ".claude" / "settings.local.json", True, "local"),
    ]
    return [(p, project) for p, project, source in files if sources is None or source in sources]


def read_settings(path: Path) -> tuple[dict[str, Any] | None, str, str]:
    """A settings file's JSON object and its text, or None and a problem ('' if absent)."""
    try:
        # a link is followed (dotfile managers link ~/.claude/settings.json): what a project
        # file may loosen is approved by its content, wherever the link points
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return None, "", ""
    except OSError as exc:
        return None, "", f"{path}: cannot be read ({exc.strerror or exc})"
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None, "", f"{path}: not a regular file"
        raw = f.read(MAX_SETTINGS_BYTES + 1)
    if len(raw) > MAX_SETTINGS_BYTES:
        return None, "", f"{path}: larger than {MAX_SETTINGS_BYTES} bytes, not read"
    text = raw.decode("utf-8", errors="replace")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return None, text, f"{path}: not valid JSON ({exc})"
    if not isinstance(data, dict):
        return None, text, f"{path}: the settings are not a JSON object"
    return data, text, ""


def _lines(text: str) -> dict[str, int]:
    """Each quoted string's first line in ``text``, to report a rule by its line."""
    found: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        for piece in line.split('"')[1::2]:
            found.setdefault(piece, number)
    return found


def _add_section(
    out: PermissionSettings,
    section: object,
    where: str,
    workspace: Path,
    *,
    text: str = "",
    loosen: bool = True,
) -> None:
    if section is None:
        return
    if not isinstance(section, Mapping):
        out.problems.append(f"{where}: 'permissions' must be an object")
        return
    lines = _lines(text) if text else None
    for decision in ("deny", "ask", "allow"):
        texts = section.get(decision)
        if texts is None or (decision == "allow" and not loosen):
            continue
        if not isinstance(texts, list):
            out.problems.append(f"{where}: permissions.{decision} must be a list of rules")
            continue
        out.rules.add(decision, texts, workspace, where=where, line_of=lines)  # type: ignore[arg-type]
    mode = section.get("defaultMode")
    if mode is not None and loosen and out.mode is None:
        out.mode, problem = parse_mode(mode, where=f"{where}: permissions.defaultMode")
        if problem:
            out.problems.append(problem)


def load_permissions(
    workspace: Path,
    *,
    config: Mapping[str, Any] | None = None,
    config_path: Path | None = None,
    config_mode: str | None = None,
    user_home: Path | None = None,
    trusted: Any = None,
    sources: Collection[SettingSource] | None = None,
) -> PermissionSettings:
    """Read every source (see the module text). ``trusted(path, section) -> bool`` says
    whether a project file's loosening is approved (``None``: never)."""
    out = PermissionSettings()
    if sources is not None and "user" not in sources:  # config.toml is the user's own
        config, config_mode = None, None
    if config_mode is not None:
        out.mode, problem = parse_mode(config_mode, where=f"{config_path}: permission_mode")
        if problem:
            out.problems.append(problem)
    if config:
        _add_section(out, config, str(config_path or "config.toml"), workspace)
    files = settings_files(workspace, user_home, sources)
    for path, project in files:
        data, text, problem = read_settings(path)
        if problem:
            out.problems.append(problem)
        if data is None:
            continue
        section = data.get("permissions")
        loosen = (
            not project or _loosens_nothing(section) or bool(trusted and trusted(path, section))
        )
        if project and not loosen:
            out.untrusted.append(path)
        _add_section(out, section, str(path), workspace, text=text, loosen=loosen)
    out.problems.extend(out.rules.problems)
    out.rules.problems = []
    return out


def _loosens_nothing(section: object) -> bool:
    return not isinstance(section, Mapping) or (
        not section.get("allow") and section.get("defaultMode") in (None, "default", "plan")
    )
