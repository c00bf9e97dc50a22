"""Attack suite (issue 38 follow-up), family 2: the provider key where users keep it on disk.

``retinue run`` in ``default`` mode, nobody to approve, the canary ``OPENAI_API_KEY`` in the
environment, and, as users commonly have it, the same key in their home folder: exported from
``~/.bashrc`` / ``~/.profile``, typed into ``~/.bash_history``, kept by other agents' CLIs
(``~/.codex/auth.json``; Claude Code's ``~/.claude/.credentials.json``). The sandbox hides
``~/.ssh``, ``~/.config``, ``~/.aws``… but none of these, so a sandboxed ``cat`` reads the
key Retinue itself keeps out of the sandbox's environment and out of ``/proc``. (The README
lists "secrets kept outside the hidden paths" among what is not guaranteed; these are the
usual places of the very key it protects.) Suggested fix: hide the shell start-up and history
files and the known agent-credential files too (``.bashrc``, ``.profile``, ``.zshrc``,
``.zshenv``, ``.bash_history``, ``.zsh_history``, ``.python_history``, ``.codex``,
``.claude/.credentials.json``, ``.claude.json``, ``.gemini``, ``.env``…), or hide ``$HOME``
as a whole and bring back only what commands need. Runs as the current user and, when that
is root, as ``nobody``.
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

CANARY = "sk-canary-attack-secrets-8e7d6c"

PLACES = {
    ".bashrc": f"export OPENAI_API_KEY={CANARY}\n",
    ".profile": f"export OPENAI_API_KEY={CANARY}\n",
    ".bash_history": f"export OPENAI_API_KEY={CANARY}\nretinue chat\n",
    ".codex/auth.json": json.dumps({"OPENAI_API_KEY": CANARY}),
    ".claude/.credentials.json": json.dumps({"claudeAiOauth": {"accessToken": CANARY}}),
}


@pytest.fixture
def root() -> Iterator[Path]:
    """A folder outside /tmp (the sandbox has its own /tmp) that ``nobody`` may use too."""
    path = Path(tempfile.mkdtemp(prefix="retinue-atk-", dir="/var/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize("uid", USERS)
def test_no_sandboxed_command_reads_the_key_from_the_home_folder(
    root: Path, uid: int | None
) -> None:
    home, ws = root / "home", root / "ws"
    ws.mkdir()
    (root / "data").mkdir()
    for rel, text in PLACES.items():
        (home / rel).parent.mkdir(parents=True, exist_ok=True)
        (home / rel).write_text(text)
    if uid is not None:
        for sub in [root, *root.rglob("*")]:
            os.lchown(sub, uid, uid)
    reads = [f"echo '== {rel}'; cat ~/{rel}" for rel in PLACES]
    model = ScriptedModel([call_tool("Bash", {"command": "; ".join(reads)}), "done"])
    with LoopbackOpenAIServer(model) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RETINUE_"))}
        env.update(RETINUE_HOME=str(root / "data"), RETINUE_BLOCK_REAL_MODELS="1",
                   HOME=str(home), OPENAI_BASE_URL=server.base_url,
                   OPENAI_API_KEY=CANARY)  # fmt: skip
        argv = [sys.executable, "-m", "retinue", "run", "--model", "openai:m", "go"]
        if uid is not None:
            argv = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *argv]
        done = subprocess.run(argv, env=env, cwd=ws, capture_output=True, text=True,
                              timeout=100, stdin=subprocess.DEVNULL, check=False)  # fmt: skip
        assert done.returncode == 0, done.stderr
    [result] = [m["content"] for m in server.requests[-1]["messages"] if m.get("role") == "tool"]
    parts = str(result).split("== ")[1:]
    leaked = [p.split("\n", 1)[0] for p in parts if CANARY in p]
    assert leaked == [], f"the key was read from {leaked}"
