"""Roles: Markdown files with YAML front matter that define a sub-agent.

Front matter keys: ``name``, ``description``, ``tools`` (allow-list as a YAML list, an inline
list, or Claude Code's comma-separated string; absent = every tool), ``model`` (a
``provider:model`` string, ``inherit``, or an alias such as ``sonnet`` mapped through the
settings' ``model_aliases``), and capabilities (``capabilities: [memory, spawn_agent]`` or
``memory: true`` / ``spawn_agent: true``). Other keys are ignored. The body is the role's
system prompt.

Search order — the first directory that defines a name wins, and every later definition of
that name is reported as *shadowed* (never dropped silently):

1. ``<workspace>/.retinue/agents/``  (the project's roles)
2. ``<home>/agents/``                (the user's roles; ``home`` is RETINUE_HOME)
3. ``<workspace>/.claude/agents/``   (Claude Code sub-agent files, read as they are)
4. the example roles shipped inside the package

A broken file is reported with its path and reason; the other roles still load.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from retinue.errors import RoleError

__all__ = [
    "CAPABILITIES",
    "Role",
    "RoleCatalog",
    "RoleProblem",
    "parse_role",
    "role_dirs",
    "valid_name",
]

CAPABILITIES = frozenset({"memory", "spawn_agent"})
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_FRONT = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)(.*)\Z", re.DOTALL)
PACKAGED_ROLES = Path(__file__).resolve().parent.parent / "roles"


def valid_name(name: str) -> bool:
    """A role or instance name: letters, digits, ``_ . -``, at most 64, no ``/`` or ``:``
    (session ids are built from them with those separators)."""
    return _NAME.fullmatch(name) is not None


@dataclass(frozen=True, slots=True)
class Role:
    name: str
    description: str
    prompt: str
    tools: tuple[str, ...] | None = None
    model: str | None = None  # None = inherit the parent's model
    capabilities: frozenset[str] = frozenset()
    source: Path | None = None

    def can(self, capability: str) -> bool:
        return capability in self.capabilities


@dataclass(frozen=True, slots=True)
class RoleProblem:
    path: Path
    reason: str
    severity: str = "error"  # "error": the file did not load; "warning": it loaded

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


def role_dirs(workspace: Path, home: Path) -> list[Path]:
    """The directories searched for roles, highest precedence first."""
    return [
        workspace / ".retinue" / "agents",
        home / "agents",
        workspace / ".claude" / "agents",
        PACKAGED_ROLES,
    ]


def parse_role(path: Path, text: str, aliases: Mapping[str, str] | None = None) -> Role:
    """Parse one role file; raise :class:`RoleError` saying what is wrong."""
    match = _FRONT.match(text.lstrip("\ufeff"))
    if not match:
        raise RoleError("missing YAML front matter (a '---' block at the top)")
    try:
        meta = yaml.safe_load(match.group(1)) or {}
    except yaml.YAMLError as exc:
        raise RoleError(f"invalid YAML front matter: {_one_line(exc)}") from None
    if not isinstance(meta, dict):
        raise RoleError("front matter must be a mapping of keys to values")
    name = str(meta.get("name") or path.stem).strip()
    if not valid_name(name):
        raise RoleError(f"invalid role name {name!r} (letters, digits, '_', '-', '.')")
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        raise RoleError("'description' is required (one line saying what the role is for)")
    return Role(
        name=name,
        description=" ".join(description.split()),
        prompt=match.group(2).strip(),
        tools=_tools(meta.get("tools")),
        model=_model(meta.get("model"), aliases or {}),
        capabilities=_capabilities(meta),
        source=path,
    )


def _tools(value: Any) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        items: Iterable[Any] = value.split(",")
    elif isinstance(value, list):
        items = value
    else:
        raise RoleError("'tools' must be a list or a comma-separated string")
    names = [str(v).strip() for v in items]
    return tuple(n for n in names if n)


def _model(value: Any, aliases: Mapping[str, str]) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise RoleError("'model' must be a string such as openai:gpt-4o-mini or inherit")
    value = value.strip()
    if value == "inherit":
        return None
    if value in aliases:
        return aliases[value]
    if ":" not in value:
        known = ", ".join(sorted(aliases)) or "none"
        raise RoleError(
            f"model {value!r} is neither provider:model, 'inherit', nor an alias ({known})"
        )
    return value


def _capabilities(meta: dict[str, Any]) -> frozenset[str]:
    caps: set[str] = set()
    listed = meta.get("capabilities") or []
    if isinstance(listed, str):
        listed = [c.strip() for c in listed.split(",")]
    if not isinstance(listed, list):
        raise RoleError("'capabilities' must be a list")
    caps.update(str(c) for c in listed)
    caps.update(c for c in CAPABILITIES if meta.get(c) is True)
    unknown = caps - CAPABILITIES
    if unknown:
        raise RoleError(f"unknown capabilities {sorted(unknown)}; known: {sorted(CAPABILITIES)}")
    return frozenset(caps)


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())


@dataclass(slots=True)
class RoleCatalog:
    """Every role found, with the problems met while loading them."""

    roles: dict[str, Role] = field(default_factory=dict)
    problems: list[RoleProblem] = field(default_factory=list)

    @classmethod
    def load(cls, dirs: Iterable[Path], aliases: Mapping[str, str] | None = None) -> RoleCatalog:
        catalog = cls()
        for directory in dirs:
            if directory.is_dir():
                for path in sorted(directory.glob("*.md")):
                    catalog._add_file(path, aliases)
        return catalog

    @classmethod
    def of(cls, *roles: Role) -> RoleCatalog:
        return cls({r.name: r for r in roles})

    def _add_file(self, path: Path, aliases: Mapping[str, str] | None) -> None:
        try:
            role = parse_role(path, path.read_text(encoding="utf-8"), aliases)
        except RoleError as exc:
            self.problems.append(RoleProblem(path, str(exc)))
            return
        except (OSError, UnicodeDecodeError) as exc:
            self.problems.append(RoleProblem(path, f"cannot read: {_one_line(exc)}"))
            return
        first = self.roles.get(role.name)
        if first is not None:
            self.problems.append(
                RoleProblem(path, f"role {role.name!r} is shadowed by {first.source}", "warning")
            )
            return
        self.roles[role.name] = role

    def get(self, name: str) -> Role:
        role = self.roles.get(name)
        if role is None:
            known = ", ".join(sorted(self.roles)) or "none"
            raise RoleError(f"unknown role {name!r}; available roles: {known}")
        return role

    def check_tools(self, known: Iterable[str]) -> None:
        """Report (as warnings) tool names in allow-lists that no tool answers to."""
        known_set = set(known)
        for role in self.roles.values():
            missing = [t for t in role.tools or () if t not in known_set]
            if missing and role.source is not None:
                self.problems.append(
                    RoleProblem(role.source, f"unknown tool names {missing} (ignored)", "warning")
                )

    def describe(self) -> str:
        """The role list for a parent's system prompt: one line per role."""
        return "\n".join(f"- {r.name}: {r.description}" for r in self.roles.values())
