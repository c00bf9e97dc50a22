"""Agent Skills: folders with a ``SKILL.md`` (YAML front matter ``name``, ``description``,
optionally ``allowed-tools``, ``license``, ``compatibility``, ``metadata``; a Markdown body;
files beside it), as the agentskills.io specification and Claude Code define them. Skills
are found in ``<workspace>/.retinue/skills/``, ``<home>/skills/``, ``<workspace>/.claude/
skills/`` and ``~/.claude/skills/`` (that precedence, as for roles; a shadowed skill is
reported), are untrusted input (regular files, bounded size and YAML depth, a bad one
reported and skipped), and are disclosed progressively: only names and descriptions reach
the main agent's prompt (bounded like the roles section), the ``Skill`` tool loads a body
or a file of the skill's folder (read-only), and a role's ``skills:`` preloads bodies into
that sub-agent's prompt, where the skills' ``allowed-tools`` narrow its tools."""

from retinue.skills.catalog import (
    Skill,
    SkillCatalog,
    SkillProblem,
    parse_skill,
    skill_dirs,
    skills_section,
)
from retinue.skills.tool import skill_tool

__all__ = [
    "Skill",
    "SkillCatalog",
    "SkillProblem",
    "parse_skill",
    "skill_dirs",
    "skill_tool",
    "skills_section",
]
