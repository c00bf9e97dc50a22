"""Attack suite (issue 38 follow-up), families 1 and 5: a home folder below the workspace.

``retinue run`` in ``default`` mode, nobody to approve, a canary ``OPENAI_API_KEY``, ``HOME``
two levels below the workspace (``ws/users/ann``: Retinue started in ``/home``, or a
workspace holding a user's folder). The sandbox protects ``<workspace>/.claude`` but not
``~/.claude``, and hides ``~/.ssh``, ``~/.config``… but not ``~/.claude``: a sandboxed
``Bash`` writes ``~/.claude/settings.json``, the user's own settings, which need no approval.
Where the user's ``config.toml`` lets their own hooks run outside the sandbox
(``[sandbox] trusted_outside = ["hooks"]``, documented), the planted ``Stop`` hook runs on
the host at the next run and writes outside the workspace. Suggested fix: mount the user's
own configuration (``~/.claude``, ``~/.claude.json``, every place :func:`settings_files`,
:func:`role_dirs` and :func:`skill_dirs` read as the user's) read-only in the sandbox, also
before it exists, wherever it lies inside the writable workspace.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from seckit import USERS

from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.testing import ScriptedModel, call_tool
from retinue.tools.builtin.sandbox import bwrap_problem

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(bwrap_problem() is not None, reason=f"no sandbox: {bwrap_problem()}"),
]

CANARY = "sk-canary-attack-home-3c2b1a"


@pytest.fixture
def root() -> Iterator[Path]:
    """A folder outside /tmp (the sandbox has its own /tmp) that ``nobody`` may use too."""
    path = Path(tempfile.mkdtemp(prefix="retinue-atk-", dir="/var/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def retinue_run(root: Path, ws: Path, home: Path, uid: int | None, *commands: str) -> list[str]:
    """``retinue run`` in ``ws`` with ``HOME=home``; its model runs each command through
    ``Bash``; the tool results it read."""
    data = root / "data"
    if uid is not None:
        for sub in [root, *root.rglob("*")]:
            os.lchown(sub, uid, uid)
    model = ScriptedModel([*(call_tool("Bash", {"command": c}) for c in commands), "done"])
    with LoopbackOpenAIServer(model) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RETINUE_"))}
        env.update(RETINUE_HOME=str(data), RETINUE_BLOCK_REAL_MODELS="1", HOME=str(home),
                   OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY=CANARY)  # fmt: skip
        argv = [sys.executable, "-m", "retinue", "run", "--model", "openai:m", "go"]
        if uid is not None:
            argv = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *argv]
        done = subprocess.run(argv, env=env, cwd=ws, capture_output=True, text=True,
                              timeout=100, stdin=subprocess.DEVNULL, check=False)  # fmt: skip
        assert done.returncode == 0, done.stderr
    found = [m["content"] for m in server.requests[-1]["messages"] if m.get("role") == "tool"]
    return [str(r) for r in found]


@pytest.mark.parametrize("uid", USERS)
def test_a_sandboxed_command_cannot_plant_the_users_own_hook(root: Path, uid: int | None) -> None:
    ws = root / "ws"
    home = ws / "users" / "ann"
    home.mkdir(parents=True)
    (root / "data").mkdir()
    (root / "data" / "config.toml").write_text('[sandbox]\ntrusted_outside = ["hooks"]\n')
    mark = root / "ran-on-the-host"
    hook = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": f"touch {mark}"}]}]}}
    plant = (
        f"mkdir -p users/ann/.claude && echo '{json.dumps(hook)}' > users/ann/.claude/settings.json"
    )
    retinue_run(root, ws, home, uid, plant)
    retinue_run(root, ws, home, uid)  # the next run, by the user
    assert not mark.exists(), "the planted hook ran outside the sandbox"
    assert not (home / ".claude" / "settings.json").exists(), "the user's settings were written"
