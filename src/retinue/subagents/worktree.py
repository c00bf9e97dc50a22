"""``isolation: worktree``: a sub-agent session works in a git worktree of the workspace.

The worktree is made when the session is built (``git worktree add --detach`` at the
workspace's ``HEAD``, under ``<data dir>/worktrees/``) and looked at when the session ends:
with no change (nothing modified or untracked, no commit made) it is removed; otherwise it is
kept and the changes are reported, for the user to merge or remove. The repository's own
hooks are not run, nor any other program its config names (:data:`INERT`: the workspace is
not trusted to run code; the sandbox keeps ``.git/config``, ``commondir`` and ``info/`` out
of a command's reach, so what they name is the user's own). A workspace that is not a git
repository with a commit gets no worktree, and the reason is reported. Every git command is
bounded in time.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path

from retinue.tools.builtin.sandbox import safe_environment, trusted_program

__all__ = ["Worktree", "close_worktree", "open_worktree"]

GIT_TIMEOUT = 60.0


@dataclass(frozen=True, slots=True)
class Worktree:
    path: Path
    workspace: Path
    base: str  # the commit it started from


INERT = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.sshCommand=false",
    "core.pager=cat",
    "core.editor=false",
    "diff.external=",
    "credential.helper=",
    "protocol.ext.allow=never",
    "submodule.recurse=false",
)
"""Settings every git command of Retinue's own runs with: no hook, file-system monitor, pager,
editor, external diff or credential helper that the workspace's config names can start."""


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    git = trusted_program("git", workspace=cwd)
    if git is None:
        raise OSError("git is not installed")
    inert = [arg for setting in INERT for arg in ("-c", setting)]
    env = {**safe_environment(os.environ), "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0"}
    return subprocess.run(
        [git, *inert, "--no-pager", "-C", str(cwd), *args],
        capture_output=True,
        text=True,
        timeout=GIT_TIMEOUT,
        check=False,
        stdin=subprocess.DEVNULL,
        env=env,
    )


def open_worktree(workspace: Path, data_dir: Path, agent_id: str) -> Worktree | str:
    """A new worktree of ``workspace`` for ``agent_id``, or the reason there is none."""
    try:
        head = _git(workspace, "rev-parse", "--verify", "HEAD")
        if head.returncode != 0:
            return f"{workspace} is not a git repository with a commit"
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", agent_id)[:80]
        path = data_dir / "worktrees" / f"{slug}-{secrets.token_hex(4)}"
        path.parent.mkdir(parents=True, exist_ok=True)
        added = _git(workspace, "worktree", "add", "--detach", str(path), "HEAD")
        if added.returncode != 0:
            return f"git worktree add failed: {added.stderr.strip()[:300]}"
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"git failed: {exc}"
    return Worktree(path, workspace, head.stdout.strip())


def close_worktree(tree: Worktree) -> str | None:
    """Remove ``tree`` when it has no change; else keep it and say what changed."""
    try:
        status = _git(tree.path, "status", "--porcelain")
        commits = _git(tree.path, "rev-list", "--count", f"{tree.base}..HEAD")
        changed = [line for line in status.stdout.splitlines() if line.strip()]
        made = int(commits.stdout.strip() or 0) if commits.returncode == 0 else 0
        if status.returncode == 0 and not changed and not made:
            removed = _git(tree.workspace, "worktree", "remove", "--force", str(tree.path))
            if removed.returncode == 0:
                return None
            return f"worktree {tree.path} could not be removed: {removed.stderr.strip()[:300]}"
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        return f"worktree {tree.path} kept (git failed: {exc})"
    files = ", ".join(line[3:] for line in changed[:10]) + (" …" if len(changed) > 10 else "")
    what = [f"{len(changed)} changed file(s): {files}"] if changed else []
    what += [f"{made} commit(s)"] if made else []
    return (
        f"worktree {tree.path} kept with {'; '.join(what)} "
        f"(merge what you want, then: git worktree remove {tree.path})"
    )
