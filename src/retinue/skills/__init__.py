"""Agent Skills: folders with a ``SKILL.md`` (YAML front matter ``name``, ``description``,
optionally ``allowed-tools``, ``disallowed-tools``, ``disable-model-invocation``,
``license``, ``compatibility``, ``metadata``; a Markdown body; files beside it), as the
agentskills.io specification and Claude Code define them. A ``name`` that is not a name
(``Agent Development``) gives way to the folder's, as in Claude Code.

Skills are found in ``<home>/skills/``, ``~/.claude/skills/``, ``<workspace>/.retinue/
skills/`` and ``<workspace>/.claude/skills/``: that precedence, the user's own before the
project's, as Claude Code's "enterprise > personal > project" (a shadowed skill is
reported). They are untrusted input (regular files, bounded size and YAML depth, a bad one
reported and skipped), and are disclosed progressively: only names and descriptions reach
the main agent's prompt (bounded like the roles section), the ``Skill`` tool loads a body
or a file of the skill's folder (read-only), and a role's ``skills:`` preloads bodies into
that sub-agent's prompt. A preloaded skill is active for the sub-agent's whole session:
its ``allowed-tools`` are *pre-approved* there (permission rules added as allow rules, so
no approval is asked for them; deny rules and modes still apply), never "only these", and
its ``disallowed-tools`` are removed from the sub-agent's tools. A skill with
``disable-model-invocation: true`` is its author's to invoke by hand: no model is offered
it, the ``Skill`` tool refuses it, and no role preloads it."""

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
