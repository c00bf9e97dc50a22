"""Which files a search may look at: the paths permission rules keep from a reading tool.

The gate decides a ``Grep`` or ``Glob`` call by its ``path``, as it decides a ``Read``: a
``Read(./secrets/**)`` deny rule refuses ``Grep(path="secrets")`` outright, but a search from
a parent folder walks into ``secrets`` on its own. Claude Code applies Read rules to Grep and
Glob too, so a search leaves out, file by file, what a Read of that file would be refused:
it asks the gate (a :class:`PathGate`, which :class:`retinue.policy.gate.Policy` is) for a
:class:`PathFilter` once per call, and every file it would list or read passes the filter
first (:func:`retinue.tools.builtin.reach.search_filter`, which adds what the Bash sandbox
hides). (Refusing the whole search instead would let ``Read(./.env)`` end every search from
the workspace root.) The walk never follows a symlink, so a link inside the tree that points
into a denied folder is never read either.

The filter is plain data, the rules' own regular expressions over absolute paths, so the
``Grep`` worker process can take it as JSON; what goes in it is the policy's decision and
what the sandbox hides, nothing the model said.
Standard library only (the worker imports it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from retinue.tools.base import ToolContext

__all__ = ["PathFilter", "PathGate", "left_out_note"]


@dataclass(frozen=True, slots=True)
class PathFilter:
    """Files a search leaves out: ``patterns`` (regular expressions, each matched against a
    whole absolute path, a folder's with a trailing ``/`` too) and the ``roots`` the
    workspace is spelt as (as written and its real path; a file's path is tried under each).
    An empty filter leaves nothing out."""

    patterns: tuple[str, ...] = ()
    roots: tuple[str, ...] = ()
    _regex: re.Pattern[str] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.patterns:
            joined = "|".join(f"(?:{p})" for p in self.patterns)
            object.__setattr__(self, "_regex", re.compile(joined))

    def __bool__(self) -> bool:
        return bool(self.patterns)

    def hides(self, rel: str) -> bool:
        """Whether the file ``rel`` (``/``-joined, below the workspace's real root) is left
        out."""
        regex = self._regex
        if regex is None:
            return False
        for root in self.roots:
            path = f"{root.rstrip('/')}/{rel}" if rel else root
            if regex.fullmatch(path) or regex.fullmatch(path + "/"):
                return True
        return False


@runtime_checkable
class PathGate(Protocol):
    """A gate that says what a search must leave out (see the module text)."""

    def hidden_paths(self, tool: str, path: str | None, ctx: ToolContext) -> PathFilter:
        """The files a ``tool`` call searching from ``path`` must not list or read."""
        ...


def left_out_note(count: int, tool: str, noun: tuple[str, str] = ("file", "files")) -> list[str]:
    """The line a search (or a listing: ``noun`` says what it counts, singular and plural)
    adds when permission rules kept files from it."""
    if not count:
        return []
    what = noun[0] if count == 1 else noun[1]
    return [f"({count} {what} that permission rules keep from {tool} were left out)"]
