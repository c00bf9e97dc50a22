"""What ``retinue roles`` prints: the roles found (stdout), then where the search looked, the
front matter fields that mean nothing here, and every file skipped or read leniently, with
the reason (stderr); Markdown files without front matter (a README in an agents folder: not
agents, which Claude Code passes over in silence) are counted in one line (``--verbose``
lists them). Everything that comes from a file is escaped before it reaches markup."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console
from rich.table import Table

from retinue.cli.term import escape
from retinue.subagents import Role, RoleCatalog, RoleProblem
from retinue.subagents.roles import PRELOAD_TOOL
from retinue.subagents.tools import brief

__all__ = ["print_catalog", "print_problems"]


def _tools(role: Role) -> str:
    text = ", ".join(role.tools) if role.tools is not None else "all"
    if role.disallowed:
        text += f" (not {', '.join(role.disallowed)})"
    if role.skills and PRELOAD_TOOL not in (*role.disallowed, *(role.tools or ())):
        text += f" + {PRELOAD_TOOL} (its preloaded skills)"  # what its run gets (factory)
    if role.can("spawn_agent"):
        text += " + delegates" + (f" to {', '.join(role.delegates)}" if role.delegates else "")
    return text


def _caps(role: Role) -> str:
    caps = sorted(role.capabilities - {"spawn_agent"})
    if role.memory_scope:
        caps = [f"memory: {role.memory_scope}" if c == "memory" else c for c in caps]
    if role.shared_memory:  # the shared memory blocks it sees
        names = [s.name if s.writable else f"{s.name} read-only" for s in role.shared_memory]
        caps.append(f"shared: {', '.join(names)}")
    if role.background:
        caps.append("background")
    if role.skills:
        caps.append(f"skills: {', '.join(role.skills)}")
    return f" ({', '.join(caps)})" if caps else ""


def print_catalog(
    catalog: RoleCatalog, out: Console, err: Console, *, verbose: bool = False
) -> None:
    table = Table("role", "description", "tools", "model", "source")
    for r in catalog.roles.values():
        table.add_row(
            escape(r.name + _caps(r)),
            escape(brief(r.description, 100)),
            escape(_tools(r)),
            escape(r.model or "inherit") + (f", {r.max_turns} turns" if r.max_turns else ""),
            escape(str(r.source)),
        )
    out.print(table)
    out.print(f"{len(catalog.roles)} roles.", highlight=False)
    for directory, count in catalog.searched:
        err.print(
            f"[dim]searched {escape(str(directory))}: {count} .md file(s)[/]", highlight=False
        )
    if ignored := catalog.ignored_fields():
        fields = ", ".join(f"{escape(k)} ({n})" for k, n in ignored.most_common())
        err.print(f"[dim]fields accepted but ignored here: {fields}[/]", highlight=False)
    quiet = [] if verbose else [p for p in catalog.problems if _not_an_agent(p)]
    print_problems([p for p in catalog.problems if p not in quiet], err, "file(s)")
    if quiet:  # Claude Code says nothing of them: one line, not one each
        err.print(
            f"[dim]{len(quiet)} Markdown file{'s' if len(quiet) != 1 else ''} without front "
            "matter skipped; --verbose lists them[/]",
            highlight=False,
        )


def _not_an_agent(problem: RoleProblem) -> bool:
    """A Markdown file that is no agent at all (no front matter: a README, notes)."""
    return problem.severity == "error" and problem.reason.startswith("no front matter")


def print_problems(problems: Iterable[RoleProblem], err: Console, what: str) -> None:
    """Errors (``skipped:``) first, then warnings, escaped; then how many were skipped."""
    listed = sorted(problems, key=lambda p: p.severity != "error")
    for p in listed:
        colour = "red" if p.severity == "error" else "yellow"
        label = "skipped" if p.severity == "error" else "warning"
        err.print(f"[{colour}]{label}:[/] {escape(str(p))}", highlight=False)
    if errors := sum(p.severity == "error" for p in listed):
        err.print(f"{errors} {what} skipped.", highlight=False)
