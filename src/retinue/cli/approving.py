"""Approving what workspace files define, from the command line: the flow ``retinue mcp
approve`` and ``retinue hooks approve`` share (names, or every one not approved after showing
them; ``--yes`` off a terminal), over :class:`~retinue.policy.trust.TrustStore`."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import typer

from retinue.cli.term import confirm, echo

if TYPE_CHECKING:
    from retinue.policy.trust import Definition, TrustStore

__all__ = ["Candidate", "approve_candidates"]


@dataclass(frozen=True, slots=True)
class Candidate:
    """One definition as the command shows it: its name, the file (and role) that defines
    it and what it runs (both made safe for a terminal), whether it may run, and what an
    approval records."""

    name: str
    where: str
    what: str
    state: str  # "own" (the user's: no approval needed), "approved" or "untrusted"
    definition: Definition | None


def approve_candidates(
    found: Sequence[Candidate],
    names: Sequence[str] | None,
    *,
    yes: bool,
    store: TrustStore,
    noun: str,
    plural: str,
) -> None:
    """Approve the ``names`` (or, without names, every candidate not approved yet, once the
    user confirms or passed ``yes``); report those that need nothing. Exits 1 on an unknown
    name, or when confirmation is needed and refused or impossible (no terminal)."""
    from retinue.policy.trust import printable

    if names:
        unknown = sorted(set(names) - {c.name for c in found})
        if unknown:
            known = ", ".join(sorted({c.name for c in found if c.state != "own"})) or "none"
            echo(f"error: no {noun} named {printable(', '.join(unknown))} is defined "
                       f"here (workspace {plural}: {printable(known)})", err=True)  # fmt: skip
            raise typer.Exit(1)
        found = [c for c in found if c.name in names]
        for c in found:
            if c.state != "untrusted":
                why = "approved already" if c.state == "approved" else "needs no approval"
                echo(f"{printable(c.name)} ({c.where}): {why}")
    chosen = [c for c in found if c.state == "untrusted"]
    if not chosen:
        if not names:
            echo(f"Nothing to approve: every {noun} defined here is approved.")
        return
    for c in chosen:
        echo(f"{printable(c.name)} ({c.where}): {c.what}")
    if not names and not yes:
        if not sys.stdin.isatty():
            echo("error: not a terminal: pass --yes to approve these, or name them",
                       err=True)  # fmt: skip
            raise typer.Exit(1)
        if not confirm(f"Approve these {len(chosen)}?"):
            echo("Nothing approved.")
            raise typer.Exit(1)
    store.approve(c.definition for c in chosen if c.definition is not None)
    echo(f"Approved {len(chosen)} (kept in {store.path}).")
