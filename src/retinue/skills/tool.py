"""The ``Skill`` tool: a skill's body, or a file of its folder, read-only and bounded."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated

from pydantic import Field

from retinue.errors import RoleError, ToolError
from retinue.skills.catalog import SKILL_FILE, Skill, SkillCatalog
from retinue.subagents.role_files import read_role_file
from retinue.tools.base import Tool, ToolContext, tool

__all__ = ["SKILL_TOOL_NAME", "skill_tool"]

SKILL_TOOL_NAME = "Skill"
MAX_LISTED_FILES = 40


def skill_tool(catalog: SkillCatalog) -> Tool:
    """The ``Skill`` tool over ``catalog``."""

    @tool(SKILL_TOOL_NAME)
    def load_skill(
        ctx: ToolContext,
        name: Annotated[str, Field(description="The skill's name, as the Skills list gives it")],
        file: Annotated[
            str | None,
            Field(description="A file of the skill's folder to read instead, relative to it"),
        ] = None,
    ) -> str:
        """Load a skill: its instructions (follow them for the task at hand), or with file=
        one of the files those instructions refer to."""
        skill = catalog.get(name.strip())
        if skill is None:
            raise ToolError(_unknown(catalog, name))
        if not skill.model_invocable:
            raise ToolError(
                f"skill {skill.name!r} is for the user to invoke (disable-model-invocation)"
            )
        if file:
            return read_skill_file(skill, file)
        return _body(skill)

    return load_skill


def _body(skill: Skill) -> str:
    files = _files(skill.folder)
    listed = f"\n\nFiles in its folder (read with Skill({skill.name!r}, file=...)): " + (
        ", ".join(files[:MAX_LISTED_FILES])
        + (f" … and {len(files) - MAX_LISTED_FILES} more" if len(files) > MAX_LISTED_FILES else "")
        if files
        else ""
    )
    tools = (
        f"\nIts allowed-tools (pre-approved where a role preloads it): "
        f"{', '.join(skill.allowed_tools)}."
        if skill.allowed_tools
        else ""
    )
    return f"# Skill {skill.name} (folder {skill.folder}){tools}\n\n{skill.body}" + (
        listed if files else ""
    )


def read_skill_file(skill: Skill, relative: str) -> str:
    """A file of the skill's folder: inside it (links resolved), regular, bounded, UTF-8."""
    root = Path(os.path.realpath(skill.folder))
    target = Path(os.path.realpath(root / relative))
    if target == root or not target.is_relative_to(root):
        raise ToolError(f"{relative!r} is not inside the folder of skill {skill.name!r}")
    try:
        return read_role_file(target)
    except RoleError as exc:
        raise ToolError(f"{relative}: {exc}") from None


def _files(folder: Path, limit: int = 200) -> list[str]:
    """The folder's files (relative, sorted, ``SKILL.md`` left out), at most ``limit``."""
    out: list[str] = []
    for base, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "node_modules")
        for n in sorted(names):
            rel = Path(base, n).relative_to(folder).as_posix()
            if rel != SKILL_FILE:
                out.append(rel)
            if len(out) >= limit:
                return out
    return out


def _unknown(catalog: SkillCatalog, name: str) -> str:
    words = set(re.findall(r"[a-z0-9]+", name.lower()))
    names = [s.name for s in catalog.offered()]
    near = [s for s in names if words & set(re.findall(r"[a-z0-9]+", s))][:8]
    known = ", ".join(near or sorted(names)[:20]) or "none"
    return f"no skill {name!r}; {'similar' if near else 'known'}: {known}"
