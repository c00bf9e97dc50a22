"""``retinue skills``: the Agent Skills found (stdout), then where the search looked, the
project instruction files read, and every skill skipped or read leniently, with the reason
(stderr). Everything that comes from a file is escaped before it reaches markup."""

from __future__ import annotations

from typing import TYPE_CHECKING

from retinue.cli.common import WorkspaceOpt, one_line_errors

if TYPE_CHECKING:
    from rich.console import Console

    from retinue.engine.instructions import Instructions
    from retinue.skills import SkillCatalog

__all__ = ["print_skills", "skills"]


def skills(workspace: WorkspaceOpt = None) -> None:
    """List the Agent Skills (SKILL.md folders) found, where each comes from, and why some
    were skipped; and the CLAUDE.md / AGENTS.md files the main agent reads."""
    from retinue.cli.term import console
    from retinue.config import Settings
    from retinue.engine.instructions import load_instructions
    from retinue.skills import SkillCatalog, skill_dirs

    with one_line_errors():
        settings = Settings.load(workspace=workspace)
        catalog = SkillCatalog.load(skill_dirs(settings.workspace, settings.home))
        project = load_instructions(settings.workspace)
    print_skills(catalog, project, console(), console(stderr=True))


def print_skills(catalog: SkillCatalog, project: Instructions, out: Console, err: Console) -> None:
    from rich.table import Table

    from retinue.cli.roles_view import print_problems
    from retinue.cli.term import escape
    from retinue.subagents.tools import brief

    table = Table("skill", "description", "pre-approved tools", "source")
    for s in catalog.skills.values():
        tools = ", ".join(s.allowed_tools or ()) or "-"
        if s.disallowed_tools:
            tools += f" (removes {', '.join(s.disallowed_tools)})"
        name = s.name if s.model_invocable else f"{s.name} (user only)"
        table.add_row(
            escape(name), escape(brief(s.description, 100)), escape(tools), escape(str(s.folder))
        )
    out.print(table)
    out.print(f"{len(catalog.skills)} skills.", highlight=False)
    for directory, count in catalog.searched:
        err.print(f"[dim]searched {escape(str(directory))}: {count} skill(s)[/]", highlight=False)
    for path in project.files:
        err.print(f"[dim]project instructions: {escape(str(path))}[/]", highlight=False)
    for problem in project.problems:
        err.print(f"[yellow]instructions:[/] {escape(problem)}", highlight=False)
    print_problems(catalog.problems, err, "skill(s)")
