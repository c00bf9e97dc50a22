"""``retinue hooks list`` (the Claude Code hooks in force: where each comes from, whether it
is approved) and ``retinue hooks approve`` / ``revoke`` (trust for the hooks that workspace
files define: ``.claude/settings.json``, ``.claude/settings.local.json``, a role file under
the workspace). A project hook runs only once its exact definition is approved."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from retinue.cli.common import WorkspaceOpt, one_line_errors

if TYPE_CHECKING:
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
State = Literal["own", "approved", "untrusted"]


@dataclass(frozen=True, slots=True)
class _Row:
    command: HookCommand
    state: State
    role: str | None = None

    @property
    def where(self) -> str:
        source = str(self.command.source) if self.command.source else "config.toml [hooks]"
        return source + (f", role {self.role}" if self.role else "")

    def definition(self) -> Definition | None:
        from retinue.policy.hooks import definition

        return definition(self.command) if self.command.source is not None else None


def _survey(workspace: Path | None) -> tuple[Settings, list[_Row], list[str]]:
    """Every hook defined for the workspace (settings files, config.toml, role files), with
    its trust state, and the problems found reading them."""
    from retinue.config import Settings
    from retinue.policy.hooks import Hooks, definition, load_hooks
    from retinue.policy.trust import TrustStore, needs_trust
    from retinue.runtime import load_roles

    settings = Settings.load(workspace=workspace)
    ws, home = settings.workspace, settings.home
    store = TrustStore(home)
    loaded = load_hooks(ws, home, config=settings.hooks, config_path=settings.config_file)
    problems = list(loaded.problems)
    sources: list[tuple[Hooks, str | None]] = [(loaded, None)]
    for role in load_roles(settings).roles.values():
        if role.hooks:
            every = Hooks.from_settings({"hooks": role.hooks}, source=role.source,
                                        renames={"Stop": "SubagentStop"})  # fmt: skip
            problems.extend(every.problems)
            sources.append((every, role.name))
    rows = [_Row(c, "untrusted") for c in loaded.untrusted]
    for hooks, role in sources:
        for c in hooks.commands:
            state: State = "own"
            if c.source is not None and needs_trust(d := definition(c), ws, home):
                state = "approved" if store.is_trusted(d) else "untrusted"
            rows.append(_Row(c, state, role))
    return settings, rows, problems


@hooks_app.command("list")
def list_hooks(workspace: WorkspaceOpt = None) -> None:
    """The hooks in force: event, matcher, command, where each is defined, and whether it
    may run (a hook a workspace file defines runs only once approved)."""
    with one_line_errors():
        _, rows, problems = _survey(workspace)
    for line in problems:
        typer.echo(f"problem: {_safe(line)}", err=True)
    if not rows:
        typer.echo(
            "No hooks configured (~/.claude/settings.json, .claude/settings.json, "
            ".claude/settings.local.json, [hooks] in config.toml, a role's hooks)."
        )
        return
    label = {"own": "", "approved": " [approved]", "untrusted": " [not approved: inert]"}
    for row in rows:
        c = row.command
        typer.echo(f"{_short(c.name)}{label[row.state]}: {_short(c.command)}\n"
                   f"    {_short(row.where)}")  # fmt: skip


def _safe(text: str) -> str:
    """``text`` (from a file, or typed) with nothing in it that a terminal acts on."""
    from retinue.policy.trust import printable

    return printable(text)


def _short(text: str) -> str:
    """A command (or a name a file gave) on one line, bounded, made safe."""
    flat = _safe(" ".join(text.split()))
    return flat if len(flat) <= 160 else flat[:159] + "…"


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
    from retinue.policy.trust import TrustStore

    with one_line_errors():
        settings, rows, _ = _survey(workspace)
        if names:
            unknown = sorted(set(names) - {r.command.name for r in rows})
            if unknown:
                known = ", ".join(sorted({_short(r.command.name) for r in rows
                                          if r.state != "own"}))  # fmt: skip
                typer.echo(f"error: no hook named {_safe(', '.join(unknown))} is defined here "
                           f"(workspace hooks: {known or 'none'})", err=True)  # fmt: skip
                raise typer.Exit(1)
            rows = [r for r in rows if r.command.name in names]
            for r in rows:
                if r.state != "untrusted":
                    why = "approved already" if r.state == "approved" else "needs no approval"
                    typer.echo(f"{_short(r.command.name)} ({_short(r.where)}): {why}")
        chosen = [r for r in rows if r.state == "untrusted"]
        if not chosen:
            if not names:
                typer.echo("Nothing to approve: every hook defined here may run.")
            return
        for r in chosen:
            typer.echo(f"{_short(r.command.name)} ({_short(r.where)}): "
                       f"{_short(r.command.command)}")  # fmt: skip
        if not names and not yes:
            if not sys.stdin.isatty():
                typer.echo("error: not a terminal: pass --yes to approve these, or name them",
                           err=True)  # fmt: skip
                raise typer.Exit(1)
            if not typer.confirm(f"Approve these {len(chosen)}?", default=False):
                typer.echo("Nothing approved.")
                raise typer.Exit(1)
        store = TrustStore(settings.home)
        store.approve(d for r in chosen if (d := r.definition()) is not None)
    typer.echo(f"Approved {len(chosen)} (kept in {store.path}).")


@hooks_app.command("revoke")
def revoke(
    names: Annotated[list[str], typer.Argument(help="the hooks whose approval to forget")],
    workspace: WorkspaceOpt = None,
) -> None:
    """Forget the approval of workspace-defined hooks: they stay inert until approved."""
    from retinue.policy.trust import TrustStore

    with one_line_errors():
        settings, rows, _ = _survey(workspace)
        defs = [d for r in rows if r.command.name in names and (d := r.definition()) is not None]
        gone = TrustStore(settings.home).revoke(defs)
    typer.echo(f"Revoked {gone} approval(s).")
