"""Attack suite (issue 38 follow-up), family 1: two Retinue processes in one workspace.

Where a protected path does not exist (``.claude``, ``.mcp.json``, ``.git/commondir``…) the
sandbox mounts a read-only placeholder and :meth:`Sandbox.release` removes it once no command
*of this process* runs there (``_RUNNING`` counts per process). A second ``retinue`` process
in the same workspace (``retinue serve`` beside ``retinue chat``, two CI jobs, the user's own
session beside a prompt-injected one) finds the placeholders there and mounts them as
existing paths; when the first process's command ends it removes them, and a mount point
removed on the host is unmounted in every sandbox. The second sandbox then writes
``.git/commondir`` (naming a config with ``core.fsmonitor``) and ``.claude/`` on the host, and
the user's next ``git status`` runs the planted program. Suggested fix: count across
processes (a lock file and a count under ``.git``/the data directory, or never remove a
placeholder another sandbox may hold: leave them, or create them in a private place), or
mount the placeholders' parent (``.git``, the workspace) so that no host-side removal can
uncover them. Runs as the current user and, when that is root, as ``nobody``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
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

CANARY = "sk-canary-attack-placeholder-6b5a4c"


@pytest.fixture
def root() -> Iterator[Path]:
    """A folder outside /tmp (the sandbox has its own /tmp) that ``nobody`` may use too."""
    path = Path(tempfile.mkdtemp(prefix="retinue-atk-", dir="/var/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def git(ws: Path, uid: int | None, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(ws.parent)}
    argv = ["git", "-C", str(ws), "-c", "user.email=a@b", "-c", "user.name=a", *args]
    return subprocess.run(as_user(argv, uid), capture_output=True, text=True, env=env,
                          timeout=60, check=False)  # fmt: skip


class Session:
    """One ``retinue run`` in ``ws``, started now, whose model runs one ``Bash`` command."""

    def __init__(self, root: Path, uid: int | None, command: str) -> None:
        model = ScriptedModel([call_tool("Bash", {"command": command, "timeout": 60000}), "ok"])
        self.server = LoopbackOpenAIServer(model).__enter__()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RETINUE_"))}
        env.update(RETINUE_HOME=str(root / "data"), RETINUE_BLOCK_REAL_MODELS="1",
                   HOME=str(root), OPENAI_BASE_URL=self.server.base_url,
                   OPENAI_API_KEY=CANARY)  # fmt: skip
        argv = as_user([sys.executable, "-m", "retinue", "run", "--model", "openai:m", "go"], uid)
        self.proc = subprocess.Popen(argv, env=env, cwd=root / "ws", stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip

    def wait(self) -> None:
        self.proc.communicate(timeout=90)
        self.server.__exit__(None, None, None)


def wait_for(path: Path) -> None:
    """Until ``path`` exists (bounded: the test's timeout ends a wait that never does)."""
    while not path.exists():
        time.sleep(0.05)


@pytest.mark.parametrize("uid", USERS)
def test_a_second_process_cannot_write_what_the_first_ones_placeholders_protect(
    root: Path, uid: int | None
) -> None:
    ws, mark = root / "ws", root / "fsmonitor-ran"
    ws.mkdir()
    (root / "data").mkdir()
    git(ws, None, "init", "-q")
    git(ws, None, "commit", "-q", "--allow-empty", "-m", "first")
    if uid is not None:
        for sub in [root, *root.rglob("*")]:
            os.lchown(sub, uid, uid)
    evil = f"[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = touch {mark}; echo\\n"
    first = Session(root, uid, "touch a-runs; until [ -e b-runs ]; do sleep 0.05; done")
    wait_for(ws / "a-runs")  # the first process's command runs, its placeholders in place
    second = Session(
        root, uid,
        f"mkdir -p evil && cp -r .git/objects .git/refs evil/ && printf '{evil}' > evil/config; "
        "touch b-runs; "
        "for i in $(seq 400); do echo ../evil > .git/commondir 2>/dev/null && break; "
        "sleep 0.05; done; mkdir -p .claude/agents; true",
    )  # fmt: skip
    first.wait()
    second.wait()
    git(ws, uid, "status")  # the user's own
    assert not mark.exists(), "the user's git status ran the planted fsmonitor"
    assert not (ws / ".git" / "commondir").exists(), ".git/commondir was written on the host"
    assert not (ws / ".claude" / "agents").exists(), ".claude was written on the host"
