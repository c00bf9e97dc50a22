"""Finding and reading skills, and the prompt text that names them (see the package doc)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retinue.errors import RoleError
from retinue.subagents.role_files import find_in_tree, read_role_file, split_front_matter
from retinue.subagents.roles import RoleProblem
from retinue.subagents.tools import bounded_listing, brief

__all__ = [
    "MAX_LISTED_SKILLS",
    "SKILLS_BUDGET_CHARS",
    "Skill",
    "SkillCatalog",
    "SkillProblem",
    "parse_skill",
    "skill_dirs",
    "skills_section",
]

SKILL_FILE = "SKILL.md"
MAX_LISTED_SKILLS = 30
SKILLS_BUDGET_CHARS = 3_600  # about 900 tokens
SKILL_BRIEF_CHARS = 110
MAX_DESCRIPTION = 1024  # the specification's limit
MAX_PRELOAD_CHARS = 20_000  # one skill's body in a sub-agent's prompt
MAX_SKILLS = 2_000  # per directory tree
MAX_DEPTH = 3  # <root>/<name>/SKILL.md, or a plugin's <root>/<plugin>/skills/<name>/SKILL.md
_SKIPPED_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__"})
_NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")  # the specification's: 1-64 of these
_LOOSE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$")


@dataclass(frozen=True, slots=True)
class Skill:
    """One skill: its folder, front matter and body (the instructions)."""

    name: str
    description: str
    body: str
    folder: Path
    allowed_tools: tuple[str, ...] | None = None  # None: the skill does not narrow
    license: str | None = None
    notes: tuple[str, ...] = ()

    def preloaded(self) -> str:
        """Its body as a sub-agent's prompt carries it (bounded, cut said)."""
        body = self.body
        if len(body) > MAX_PRELOAD_CHARS:
            body = body[:MAX_PRELOAD_CHARS] + f"\n[… cut at {MAX_PRELOAD_CHARS} characters]"
        return f"### Skill: {self.name}\n(folder: {self.folder})\n\n{body}"


SkillProblem = RoleProblem  # (path, reason, severity): the same report as a role's


def skill_dirs(workspace: Path, home: Path, user_home: Path | None = None) -> list[Path]:
    """Where skills are searched, highest precedence first (as :func:`role_dirs`)."""
    return [
        workspace / ".retinue" / "skills",
        home / "skills",
        workspace / ".claude" / "skills",
        (user_home or Path.home()) / ".claude" / "skills",
    ]


def parse_skill(folder: Path, text: str) -> Skill:
    """One ``SKILL.md``; :class:`RoleError` says what is wrong."""
    meta, notes, body = split_front_matter(text)
    raw = meta.get("name")
    if raw is None:
        name = folder.name
        notes.append(f"no 'name'; the folder's name {name!r} is used")
    elif isinstance(raw, str | int) and str(raw).strip():
        name = str(raw).strip()
    else:
        raise RoleError("'name' must be text")
    if not _LOOSE_NAME.fullmatch(name):
        raise RoleError(f"invalid skill name {name!r} (lowercase letters, digits and '-')")
    if not _NAME.fullmatch(name) or "--" in name:
        notes.append(f"name {name!r} is not lowercase letters, digits and single '-'")
    if name != folder.name:
        notes.append(f"name {name!r} differs from its folder's, {folder.name!r}")
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        raise RoleError("'description' is required (what the skill does and when to use it)")
    description = " ".join(description.split())
    if len(description) > MAX_DESCRIPTION:
        notes.append(f"description longer than {MAX_DESCRIPTION} characters")
    licence = meta.get("license")
    return Skill(
        name=name,
        description=description,
        body=body,
        folder=folder,
        allowed_tools=_allowed_tools(meta.get("allowed-tools"), notes),
        license=str(licence)[:200] if licence is not None else None,
        notes=tuple(notes),
    )


def _allowed_tools(value: Any, notes: list[str]) -> tuple[str, ...] | None:
    """``allowed-tools``: space-delimited (the specification), commas or a list (Claude
    Code); ``Bash(git:*)`` counts as ``Bash`` (patterns are the policy's business)."""
    if value is None:
        return None
    if isinstance(value, str):
        items = re.findall(r"[^\s,()]+(?:\([^)]*\))?", value)
    elif isinstance(value, list):
        items = [str(v).strip() for v in value if isinstance(v, str | int)]
    else:
        notes.append("'allowed-tools' is not a list of tools (ignored)")
        return None
    return tuple(dict.fromkeys(i.split("(", 1)[0] for i in items if i))


def _skill_folders(root: Path) -> Iterator[Path]:
    """Folders under ``root`` holding a ``SKILL.md`` (not looked into further), sorted."""

    def pick(entry: Path) -> bool | None:  # a skill / a folder to look into / neither
        if not entry.is_dir() or entry.name in _SKIPPED_DIRS:
            return None
        return os.path.lexists(entry / SKILL_FILE)

    return find_in_tree(root, pick, max_depth=MAX_DEPTH - 1, max_found=MAX_SKILLS)


@dataclass(slots=True)
class SkillCatalog:
    """Every skill found, where the search looked, and the problems met while loading."""

    skills: dict[str, Skill] = field(default_factory=dict)
    problems: list[SkillProblem] = field(default_factory=list)
    searched: list[tuple[Path, int]] = field(default_factory=list)

    @classmethod
    def load(cls, dirs: Iterable[Path]) -> SkillCatalog:
        catalog = cls()
        for directory in dirs:
            folders = list(_skill_folders(directory))
            catalog.searched.append((directory, len(folders)))
            for folder in folders:
                catalog._add(folder)
        return catalog

    @classmethod
    def of(cls, *skills: Skill) -> SkillCatalog:
        return cls({s.name: s for s in skills})

    def _add(self, folder: Path) -> None:
        path = folder / SKILL_FILE
        try:
            skill = parse_skill(folder, read_role_file(path))
        except RoleError as exc:
            self.problems.append(SkillProblem(path, str(exc)))
            return
        first = self.skills.get(skill.name)
        if first is not None:
            reason = f"skill {skill.name!r} is shadowed by {first.folder / SKILL_FILE}"
            self.problems.append(SkillProblem(path, reason, "warning"))
            return
        self.skills[skill.name] = skill
        self.problems.extend(SkillProblem(path, n, "warning") for n in skill.notes)

    def get(self, name: str) -> Skill | None:
        return self.skills.get(name)

    def errors(self) -> list[SkillProblem]:
        return [p for p in self.problems if p.severity == "error"]

    def preload(self, names: Sequence[str]) -> tuple[list[Skill], list[str]]:
        """The skills ``names`` asks for, and the names no skill answers to."""
        found = [s for n in names if (s := self.skills.get(n)) is not None]
        return found, [n for n in names if n not in self.skills]


def skills_section(catalog: SkillCatalog) -> str:
    """The main agent's prompt section: names and descriptions only, bounded (past
    :data:`MAX_LISTED_SKILLS` or :data:`SKILLS_BUDGET_CHARS`, names only)."""
    skills = list(catalog.skills.values())
    if not skills:
        return ""
    head = (
        "## Skills\nBefore work that one of these skills fits, call Skill(name) to load its "
        "instructions (Skill(name, file=...) reads a file of its folder).\n"
    )
    items = [(s.name, brief(s.description, SKILL_BRIEF_CHARS)) for s in skills]
    lines, names = bounded_listing(items, most=MAX_LISTED_SKILLS, budget=SKILLS_BUDGET_CHARS)
    return head + (lines if lines is not None else f"Skills: {names}.")
