"""Attack suite (issue 38 follow-up), family 1: links planted in ``.git``.

``retinue run`` in ``default`` mode, nobody to approve; a scripted model's sandboxed ``Bash``
replaces ``.git/logs/HEAD`` with a link to a file outside the workspace and ``.git/refs/heads``
with a link to a folder outside it (``logs/`` and ``refs/`` stay writable so that commits
work). The user's next ``git commit`` on the host then appends its reflog line to that file
and writes the branch into that folder: git follows links under ``.git``. Suggested fix: after
each sandboxed command (in :meth:`Sandbox.release`, say), remove or refuse any link below
``.git`` that git itself never makes, or keep ``.git``'s writable parts on a mount that
refuses links; ``retinue doctor`` can warn about one too. Runs as the current user and, when
that is root, as ``nobody``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from seckit import USERS, as_user

from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.testing import ScriptedModel, call_tool
from retinue.tools.builtin.sandbox import bwrap_problem

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(bwrap_problem() is not None, reason=f"no sandbox: {bwrap_problem()}"),
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed"),
]

CANARY = "sk-canary-attack-git-9a8b7c"


@pytest.fixture
def root() -> Iterator[Path]:
    """A folder outside /tmp (the sandbox has its own /tmp) that ``nobody`` may use too."""
    path = Path(tempfile.mkdtemp(prefix="retinue-atk-", dir="/var/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def git(ws: Path, uid: int | None, *args: str) -> subprocess.CompletedProcess[str]:
    """The user's own ``git`` in ``ws``."""
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(ws.parent)}
    argv = ["git", "-C", str(ws), "-c", "user.email=a@b", "-c", "user.name=a", *args]
    return subprocess.run(as_user(argv, uid), capture_output=True, text=True, env=env,
                          timeout=60, check=False)  # fmt: skip


def attack(root: Path, ws: Path, uid: int | None, *commands: str) -> None:
    """``retinue run`` in ``ws`` whose model runs each command through ``Bash``."""
    data = root / "data"
    data.mkdir(exist_ok=True)
    if uid is not None:
        for sub in [root, *root.rglob("*")]:
            os.lchown(sub, uid, uid)
    model = ScriptedModel([*(call_tool("Bash", {"command": c}) for c in commands), "done"])
    with LoopbackOpenAIServer(model) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RETINUE_"))}
        env.update(RETINUE_HOME=str(data), RETINUE_BLOCK_REAL_MODELS="1", HOME=str(root),
                   OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY=CANARY)  # fmt: skip
        argv = as_user([sys.executable, "-m", "retinue", "run", "--model", "openai:m", "go"], uid)
        done = subprocess.run(argv, env=env, cwd=ws, capture_output=True, text=True,
                              timeout=100, stdin=subprocess.DEVNULL, check=False)  # fmt: skip
        assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("uid", USERS)
def test_the_users_commit_writes_nothing_outside_the_workspace(root: Path, uid: int | None) -> None:
    ws = root / "ws"
    ws.mkdir()
    git(ws, None, "init", "-q")
    git(ws, None, "commit", "-q", "--allow-empty", "-m", "first")
    victim, folder = root / "victim.txt", root / "victim-dir"
    victim.write_text("precious\n")
    folder.mkdir()
    attack(
        root, ws, uid,
        f"rm -f .git/logs/HEAD && ln -s {victim} .git/logs/HEAD",
        f"rm -rf .git/refs/heads && ln -s {folder} .git/refs/heads",
    )  # fmt: skip
    assert git(ws, uid, "commit", "-q", "--allow-empty", "-m", "by the user").returncode == 0
    assert victim.read_text() == "precious\n", "the reflog was appended outside the workspace"
    assert list(folder.iterdir()) == [], "a branch was written outside the workspace"
