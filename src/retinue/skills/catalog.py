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
    allowed_tools: tuple[str, ...] | None = None  # pre-approved while active, as written
    license: str | None = None
    notes: tuple[str, ...] = ()
    disallowed_tools: tuple[str, ...] = ()  # removed from a sub-agent that preloads it
    model_invocable: bool = True  # False: disable-model-invocation (the user's to invoke)

    def preloaded(self) -> str:
        """Its body as a sub-agent's prompt carries it (bounded, cut said)."""
        body = self.body
        if len(body) > MAX_PRELOAD_CHARS:
            body = body[:MAX_PRELOAD_CHARS] + f"\n[… cut at {MAX_PRELOAD_CHARS} characters]"
        return f"### Skill: {self.name}\n(folder: {self.folder})\n\n{body}"


SkillProblem = RoleProblem  # (path, reason, severity): the same report as a role's


def skill_dirs(workspace: Path, home: Path, user_home: Path | None = None) -> list[Path]:
    """Where skills are searched, highest precedence first: the user's own before the
    project's, as Claude Code ranks them ("enterprise > personal > project"; the reverse of
    roles, where a project's sub-agents win), Retinue's folder before Claude Code's in each."""
    return [
        home / "skills",
        (user_home or Path.home()) / ".claude" / "skills",
        workspace / ".retinue" / "skills",
        workspace / ".claude" / "skills",
    ]


def parse_skill(folder: Path, text: str) -> Skill:
    """One ``SKILL.md``; :class:`RoleError` says what is wrong."""
    meta, notes, body = split_front_matter(text)
    name = _name(folder, meta.get("name"), notes)
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
    hidden = meta.get("disable-model-invocation", False)
    if not isinstance(hidden, bool):
        notes.append(f"disable-model-invocation {hidden!r} is not true or false (read as true)")
    return Skill(
        name=name,
        description=description,
        body=body,
        folder=folder,
        allowed_tools=_tool_list(meta.get("allowed-tools"), "allowed-tools", notes),
        license=str(licence)[:200] if licence is not None else None,
        notes=tuple(notes),
        disallowed_tools=_tool_list(meta.get("disallowed-tools"), "disallowed-tools", notes) or (),
        model_invocable=hidden is False,
    )


def _name(folder: Path, raw: Any, notes: list[str]) -> str:
    """The skill's name: its ``name``, or its folder's when it has none or one that is not
    a name (``Agent Development``: Claude Code loads that skill under its folder's name)."""
    if raw is not None and not (isinstance(raw, str | int) and str(raw).strip()):
        raise RoleError("'name' must be text")
    name = str(raw).strip() if raw is not None else None
    if name is not None and _LOOSE_NAME.fullmatch(name):
        return name
    if not _LOOSE_NAME.fullmatch(folder.name):
        shown = name if name is not None else folder.name
        raise RoleError(f"invalid skill name {shown!r} (lowercase letters, digits and '-')")
    said = "no 'name'" if name is None else f"name {name[:80]!r} is not a skill name"
    notes.append(f"{said}; the folder's name {folder.name!r} is used")
    return folder.name


def _tool_list(value: Any, key: str, notes: list[str]) -> tuple[str, ...] | None:
    """``allowed-tools`` / ``disallowed-tools``: space-delimited (the specification), commas
    or a list (Claude Code); entries as written (``Bash(git:*)``: a permission rule)."""
    if value is None:
        return None
    if isinstance(value, str):
        items = re.findall(r"[^\s,()]+(?:\([^)]*\))?", value[:MAX_DESCRIPTION])
    elif isinstance(value, list):
        items = [str(v).strip() for v in value[:100] if isinstance(v, str | int)]
    else:
        notes.append(f"'{key}' is not a list of tools (ignored)")
        return None
    return tuple(dict.fromkeys(i for i in items if i))


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

    def offered(self) -> list[Skill]:
        """The skills a model is offered (``disable-model-invocation`` ones left out)."""
        return [s for s in self.skills.values() if s.model_invocable]

    def preload(self, names: Sequence[str]) -> tuple[list[Skill], list[str]]:
        """The skills ``names`` asks for, and the names no skill answers to (a skill whose
        author reserved it for the user is not preloaded either, as in Claude Code)."""
        found = [s for n in names if (s := self.skills.get(n)) is not None and s.model_invocable]
        return found, [n for n in names if n not in {s.name for s in found}]


def skills_section(catalog: SkillCatalog) -> str:
    """The main agent's prompt section: names and descriptions only, bounded (past
    :data:`MAX_LISTED_SKILLS` or :data:`SKILLS_BUDGET_CHARS`, names only); skills whose
    author set ``disable-model-invocation`` are not offered."""
    skills = catalog.offered()
    if not skills:
        return ""
    head = (
        "## Skills\nBefore work that one of these skills fits, call Skill(name) to load its "
        "instructions (Skill(name, file=...) reads a file of its folder).\n"
    )
    items = [(s.name, brief(s.description, SKILL_BRIEF_CHARS)) for s in skills]
    lines, names = bounded_listing(items, most=MAX_LISTED_SKILLS, budget=SKILLS_BUDGET_CHARS)
    return head + (lines if lines is not None else f"Skills: {names}.")
