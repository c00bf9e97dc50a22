"""``retinue hooks list`` (the Claude Code hooks in force: where each comes from, whether it
is approved) and ``retinue hooks approve`` / ``revoke`` (trust for the hooks that workspace
files define: ``.claude/settings.json``, ``.claude/settings.local.json``, a role file under
the workspace). A project hook runs only once its exact definition is approved."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from retinue.cli.common import WorkspaceOpt, one_line_errors
from retinue.cli.term import echo

if TYPE_CHECKING:
    from retinue.cli.approving import Candidate
    from retinue.config import Settings
    from retinue.policy.hooks import HookCommand
    from retinue.policy.trust import Definition

__all__ = ["hooks_app"]

hooks_app = typer.Typer(
    name="hooks",
    help="Claude Code hooks: list them, approve the ones the workspace defines.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


def _survey(workspace: Path | None) -> tuple[Settings, list[Candidate], list[str]]:
    """Every hook defined for the workspace (settings files, config.toml, role files), with
    its trust state, and the problems found reading them."""
    from retinue.cli.approving import Candidate
    from retinue.config import Settings
    from retinue.policy.hooks import Hooks, definition, load_hooks
    from retinue.policy.trust import TrustStore, needs_trust
    from retinue.runtime import load_roles

    settings = Settings.load(workspace=workspace)
    ws, home = settings.workspace, settings.home
    store = TrustStore(home)
    loaded = load_hooks(ws, home, config=settings.hooks, config_path=settings.config_file)
    problems = list(loaded.problems)
    found: list[tuple[HookCommand, str | None, str]] = [
        (c, None, "untrusted") for c in loaded.untrusted
    ]
    sources: list[tuple[Hooks, str | None]] = [(loaded, None)]
    for role in load_roles(settings).roles.values():
        if role.hooks:
            every = Hooks.from_settings({"hooks": role.hooks}, source=role.source,
                                        renames={"Stop": "SubagentStop"})  # fmt: skip
            problems.extend(every.problems)
            sources.append((every, role.name))
    for hooks, role in sources:
        for c in hooks.commands:
            state = "own"
            if c.source is not None and needs_trust(d := definition(c), ws, home):
                state = "approved" if store.is_trusted(d) else "untrusted"
            found.append((c, role, state))
    rows = [
        Candidate(c.name, _where(c, role), _short(c.command), state, _definition(c))
        for c, role, state in found
    ]
    return settings, rows, problems


def _definition(c: HookCommand) -> Definition | None:
    from retinue.policy.hooks import definition

    return definition(c) if c.source is not None else None  # config.toml's are the user's


def _where(c: HookCommand, role: str | None) -> str:
    source = str(c.source) if c.source else "config.toml [hooks]"
    return _short(source + (f", role {role}" if role else ""))


def _short(text: str) -> str:
    """A command (or a path a file gave) on one line, bounded, nothing a terminal acts on."""
    from retinue.policy.trust import printable

    flat = printable(" ".join(text.split()))
    return flat if len(flat) <= 160 else flat[:159] + "…"


@hooks_app.command("list")
def list_hooks(workspace: WorkspaceOpt = None) -> None:
    """The hooks in force: event, matcher, command, where each is defined, and whether it
    may run (a hook a workspace file defines runs only once approved)."""
    from retinue.policy.trust import printable

    with one_line_errors():
        _, rows, problems = _survey(workspace)
    for line in problems:
        echo(f"problem: {printable(line)}", err=True)
    if not rows:
        echo(
            "No hooks configured (~/.claude/settings.json, .claude/settings.json, "
            ".claude/settings.local.json, [hooks] in config.toml, a role's hooks)."
        )
        return
    label = {"own": "", "approved": " [approved]", "untrusted": " [not approved: inert]"}
    for row in rows:
        echo(f"{printable(row.name)}{label[row.state]}: {row.what}\n    {row.where}")


@hooks_app.command("approve")
def approve(
    names: Annotated[
        list[str] | None,
        typer.Argument(help="the hooks to approve, as `list` names them (default: every one)"),
    ] = None,
    workspace: WorkspaceOpt = None,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="approve without asking (needed off a terminal)")
    ] = False,
) -> None:
    """Approve hooks that workspace files define, so that they run. The approval is of that
    exact definition (event, matcher, place, command) in that file: a changed one needs
    approval again. Without NAMES: every one not approved yet, after showing them."""
    from retinue.cli.approving import approve_candidates
    from retinue.policy.trust import TrustStore

    with one_line_errors():
        settings, rows, _ = _survey(workspace)
        store = TrustStore(settings.home)
        approve_candidates(rows, names, yes=yes, store=store, noun="hook", plural="hooks")


@hooks_app.command("revoke")
def revoke(
    names: Annotated[list[str], typer.Argument(help="the hooks whose approval to forget")],
    workspace: WorkspaceOpt = None,
) -> None:
    """Forget the approval of workspace-defined hooks: they stay inert until approved."""
    from retinue.policy.trust import TrustStore

    with one_line_errors():
        settings, rows, _ = _survey(workspace)
        defs = [r.definition for r in rows if r.name in names and r.definition is not None]
        gone = TrustStore(settings.home).revoke(defs)
    echo(f"Revoked {gone} approval(s).")
