"""The workspace root every file and shell tool is confined to.

One rule, in one place: a path the model gives is taken relative to ``ctx.workspace``
(absolute paths are accepted too), its real path is computed (``..`` collapsed, every
symlink followed, even a dangling one), and it is refused with a :class:`WorkspaceError`
unless that real path lies inside the workspace's own real path.

The check alone could be raced (a folder swapped for a symlink between the check and the
open), so the file tools never open the checked path by name: :func:`locate` gives its
components below the root, and :mod:`retinue.tools.builtin._fsafe` opens them one by one
relative to directory descriptors with ``O_NOFOLLOW``. What a shell command does once it runs
is the shell tool's business.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from retinue.errors import ToolError, WorkspaceError
from retinue.tools.base import ToolContext

__all__ = ["Target", "display_path", "inside", "locate", "resolve_in_workspace", "workspace_root"]


@dataclass(frozen=True, slots=True)
class Target:
    """A checked path: the workspace root, the real path, and its components below the root."""

    root: Path
    real: Path
    parts: tuple[str, ...]
    shown: str


def workspace_root(ctx: ToolContext) -> Path:
    """The real (symlink-free, absolute) path of the calling agent's workspace."""
    return Path(os.path.realpath(ctx.workspace))


def resolve_in_workspace(ctx: ToolContext, path: str | os.PathLike[str]) -> Path:
    """``path`` resolved against the workspace; ``WorkspaceError`` if it leads outside it."""
    text = os.fspath(path)
    if not text.strip():
        raise ToolError("path is empty")
    if "\0" in text:
        raise ToolError("path contains a NUL character")
    root = workspace_root(ctx)
    candidate = Path(text).expanduser()
    if not candidate.is_absolute():
        candidate = root / candidate
    real = Path(os.path.realpath(candidate))
    if not inside(real, root):
        raise WorkspaceError(
            f"path {text!r} is outside the workspace {root}; "
            "only files inside the workspace can be used"
        )
    return real


def locate(ctx: ToolContext, path: str | os.PathLike[str]) -> Target:
    """``path`` checked as :func:`resolve_in_workspace` does, split for a race-free open."""
    real = resolve_in_workspace(ctx, path)
    root = workspace_root(ctx)
    parts = real.relative_to(root).parts
    return Target(root, real, parts, display_path(real, root))


def inside(path: Path, root: Path) -> bool:
    """Whether ``path`` (already resolved) is ``root`` or lies below it."""
    return path == root or path.is_relative_to(root)


def display_path(path: Path, root: Path) -> str:
    """``path`` as the model should see it: relative to the workspace root when inside it."""
    try:
        rel = path.relative_to(root)
    except ValueError:
        return str(path)
    return str(rel) if rel.parts else "."
