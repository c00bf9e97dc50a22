"""What the file tools may reach, judged on the path they really open, when they open it.

The gate (:mod:`retinue.policy.gate`) decides a call on its path as spelt, before an
approval wait that may last minutes; meanwhile a folder on the way may become a symlink
(the agent's own sandboxed ``Bash`` can make one). So every file tool judges again in its
worker thread: on the path it resolved after the wait, and once more on the path of the
folder it holds open (read back from the descriptor, ``/proc/self/fd``) joined with the name
it opens there. Three checks (:meth:`Reach.check`):

- *hidden*: what the ``Bash`` sandbox hides is hidden from the file tools too, even inside
  the workspace: :data:`~retinue.tools.builtin.sandbox.SECRET_PATHS` under ``$HOME``
  (``~/.ssh``, ``~/.aws``...) and the data directory (``RETINUE_HOME``: server tokens,
  approvals, config). Nothing there is read, listed, searched, written or created. A place
  that holds the workspace is not hidden (the sandbox mounts the workspace over it), and one
  outside it needs no hiding (no file tool reaches it: a folder moved out of the workspace
  while it was being opened is refused too);
- *rules*: what a deny rule, or an ask rule nobody was asked about, keeps from the tool (the
  gate's :class:`~retinue.tools.builtin.pathrules.PathFilter`);
- *protected*: an edit that lands in what runs later (:data:`PROTECTED` at the top of the
  workspace or of ``$HOME``, or anything in the data directory, unless that place holds the
  workspace) through a path that did not name it is refused: the person approved a
  different path.

``~`` is expanded here as :func:`~retinue.tools.builtin.workspace.locate` expands it, and
names are compared case-folded (for the filesystems that ignore case). The gate's own test of
a protected path is :meth:`Places.protected`, so the two never disagree.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from retinue.errors import ToolError, WorkspaceError
from retinue.tools.builtin.pathrules import PathFilter, PathGate
from retinue.tools.builtin.sandbox import PROTECTED as READ_ONLY
from retinue.tools.builtin.sandbox import SECRET_PATHS

if TYPE_CHECKING:
    from retinue.tools.base import ToolContext

__all__ = ["PROTECTED", "Places", "Reach", "opened", "search_filter", "spellings"]

PROTECTED = tuple(dict.fromkeys(p.split("/", 1)[0] for p in READ_ONLY))
"""Names at the top of the workspace (or of ``$HOME``) whose files decide what runs later
(``.claude``, ``.mcp.json``, ``.retinue``, ``.git``: the first names of what the sandbox
keeps read-only): an edit anywhere below one needs a person's yes in every mode."""


def spellings(path: str | os.PathLike[str]) -> tuple[str, ...]:
    """``path`` as written (absolute, ``~`` expanded, normalised) and through its links."""
    text = os.path.normpath(os.path.abspath(os.path.expanduser(os.fspath(path))))
    out = [text]
    with contextlib.suppress(ValueError, OSError):  # (a NUL in it: no tool can open it)
        out.append(os.path.realpath(text))
    return tuple(dict.fromkeys(out))


def _below(path: str, base: str) -> str | None:
    """``path`` relative to ``base`` ("" for ``base`` itself), or None; both absolute and
    normalised, their components compared case-folded."""
    have = [c for c in path.split(os.sep) if c]
    want = [c.casefold() for c in base.split(os.sep) if c]
    if [c.casefold() for c in have[: len(want)]] != want:
        return None
    return os.sep.join(have[len(want) :])


@dataclass(frozen=True, slots=True)
class Places:
    """The spellings (as written, and real) of the workspace, ``$HOME`` and the data
    directory of one call."""

    workspace: tuple[str, ...]
    home: tuple[str, ...]
    data: tuple[str, ...]

    @classmethod
    def of(cls, ctx: ToolContext) -> Places:
        return cls(spellings(ctx.workspace), spellings("~"), spellings(ctx.data_dir))

    def _holds_workspace(self, place: tuple[str, ...]) -> bool:
        return any(_below(w, p) is not None for w in self.workspace for p in place)

    def hidden(self) -> tuple[str, ...]:
        """Every spelling of what the file tools would reach but must not: the hidden places
        (see the module text) that lie inside the workspace (nothing else is reached)."""
        secrets = [spellings(os.path.join(self.home[0], s)) for s in SECRET_PATHS]
        found = [
            p
            for place in (self.data, *secrets)
            if not self._holds_workspace(place) and self._inside(place)
            for p in place
        ]
        return tuple(dict.fromkeys(found))

    def _inside(self, place: tuple[str, ...]) -> bool:
        return any(self.in_workspace(p) is not None for p in place)

    def protected(self, path: str) -> bool:
        """Whether the absolute ``path`` is in what runs later: a :data:`PROTECTED` name at
        the top of the workspace or of ``$HOME``, or the data directory (unless the place
        holds the workspace: a worktree's workspace lies in the data directory)."""
        for base in (*self.workspace, *self.home):
            rel = _below(path, base)
            name = rel.split(os.sep, 1)[0] if rel else ""
            if name.casefold() in PROTECTED and not self._holds_workspace((base + os.sep + name,)):
                return True  # (not ~/.retinue for a worktree in <data dir>/worktrees)
        if self._holds_workspace(self.data):
            return False
        return any(_below(path, d) is not None for d in self.data)

    def in_workspace(self, path: str) -> str | None:
        """``path`` relative to the workspace (``/``-joined; "" for the root), or None."""
        for w in self.workspace:
            rel = _below(path, w)
            if rel is not None:
                return rel.replace(os.sep, "/")
        return None


def _hiding(hidden: tuple[str, ...]) -> tuple[str, ...]:
    """Hidden places as a :class:`PathFilter`'s patterns (case-folded)."""
    return tuple(f"(?i:{re.escape(h)})(?:/(?s:.*))?" for h in hidden)


def _rules(ctx: ToolContext, tool: str, path: str | None) -> PathFilter:
    """What the calling agent's gate keeps from ``tool`` (nothing without a gate)."""
    gate = ctx.gate
    return gate.hidden_paths(tool, path, ctx) if isinstance(gate, PathGate) else PathFilter()


def search_filter(ctx: ToolContext, tool: str, path: str | None) -> PathFilter:
    """What a search or listing from ``path`` leaves out: what the calling agent's gate keeps
    from ``tool``, and what is hidden from every file tool."""
    places = Places.of(ctx)
    patterns = (*_rules(ctx, tool, path).patterns, *_hiding(places.hidden()))
    return PathFilter(patterns, places.workspace)


@dataclass(frozen=True, slots=True)
class Reach:
    """What one call of a file tool may open (made in the event loop, checked in the thread)."""

    tool: str
    spelt: str  # the path as the model wrote it
    places: Places
    hidden: tuple[str, ...]  # Places.hidden(), once
    rules: PathFilter  # what the gate keeps from this tool
    lexical: str  # the path as written: absolute, ``~`` expanded, links not followed
    edit: bool

    @classmethod
    def of(cls, ctx: ToolContext, tool: str, spelt: str, *, edit: bool = False) -> Reach:
        places = Places.of(ctx)
        lexical = os.path.join(places.workspace[0], os.path.expanduser(spelt))
        return cls(tool, spelt, places, places.hidden(), _rules(ctx, tool, spelt),
                   os.path.normpath(lexical), edit)  # fmt: skip

    def check(self, path: str | os.PathLike[str]) -> None:
        """``WorkspaceError`` / ``ToolError`` unless this call may open the absolute
        ``path`` (see the module text)."""
        path = os.fspath(path)
        self.check_hidden(path)
        rel = self.places.in_workspace(path)
        if rel is None:  # (the folder opened was moved out of the workspace meanwhile)
            raise WorkspaceError(
                f"{self.spelt} no longer lies inside the workspace (a folder on the way was "
                "moved while it was being opened); nothing was opened"
            )
        shown = rel or "."
        if self.rules.hides(rel):
            raise ToolError(f"{self._via(rel, shown)}permission rules keep {shown} from "
                            f"{self.tool}; nothing was opened")  # fmt: skip
        if self.edit and self.places.protected(path) and not self.places.protected(self.lexical):
            raise WorkspaceError(
                f"{self._via(rel, shown)}{shown} holds what runs later (settings, hooks, "
                f"servers), but this call named {self.spelt}: what allowed it (an approval, a "
                f"rule or the mode) did not cover {shown}, so nothing was written. To change "
                f"it, name {shown} as it is, so that a person is asked"
            )

    def check_hidden(self, path: str | os.PathLike[str]) -> None:
        """``WorkspaceError`` if the absolute ``path`` (or the path as written) is hidden
        from the file tools (a search or a listing checks its folder so: the rules it
        applies file by file)."""
        path = os.fspath(path)
        if any(_below(p, h) is not None for p in (path, self.lexical) for h in self.hidden):
            raise WorkspaceError(
                f"{self.spelt} is hidden from the file tools: it holds secrets or Retinue's "
                "own data (keys, tokens, settings), which the Bash sandbox hides as well"
            )

    def _via(self, rel: str, shown: str) -> str:
        """What to say first when the path opened is not the path as written."""
        written = self.places.in_workspace(self.lexical)
        if written is not None and rel.casefold() == written.casefold():
            return ""
        return f"{self.spelt} leads through a symbolic link to {shown}: "


def opened(dir_fd: int, name: str, expected: Path) -> str:
    """The absolute path of ``name`` in the folder ``dir_fd`` holds open, as the kernel
    knows that folder now (``expected`` where it cannot say)."""
    try:
        where = os.readlink(f"/proc/self/fd/{dir_fd}")
    except OSError:
        return str(expected)
    if not os.path.isabs(where):  # (a pseudo-path: an unlinked folder, say)
        return str(expected)
    return os.path.join(where, name)
