"""Attack suite (issue 38 follow-up), families 2 and 4: a confined hook and the deny rules.

``retinue run`` in ``default`` mode, nobody to approve, a canary ``OPENAI_API_KEY``. The
user's own settings deny ``Read(./secrets/**)`` and ``Edit(./protected/**)`` and run a
``Stop`` hook ``sh lint.sh`` (a workspace script, as ``make lint`` or ``npm run lint`` are).
The agent's sandboxed ``Bash`` meets the rules (``cat secrets/key.txt`` finds nothing) but
rewrites ``lint.sh``; the hook runs it in the sandbox at the end of the same turn, and that
sandbox (:meth:`retinue.policy.launch.Launch.start`, ``Sandbox.for_workspace`` without the
gate's rule paths) neither hides the secret nor protects the file. The README says deny rules
become "paths hidden from every sandboxed command". Suggested fix: give ``Launch`` the gate's
:class:`~retinue.tools.builtin.sandbox.RuleMounts` and mount the rule paths in every confined
start, as ``shell._with_rules`` does for ``Bash`` (refusing the start when the walk is
incomplete). Runs as the current user and, when that is root, as ``nobody``.
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

CANARY = "sk-canary-attack-confined-4d3c2b"


@pytest.fixture
def root() -> Iterator[Path]:
    """A folder outside /tmp (the sandbox has its own /tmp) that ``nobody`` may use too."""
    path = Path(tempfile.mkdtemp(prefix="retinue-atk-", dir="/var/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def retinue_run(root: Path, uid: int | None, *commands: str) -> list[str]:
    """``retinue run`` in ``root/ws`` (``HOME=root/home``) whose model runs each command
    through ``Bash``; the tool results it read."""
    if uid is not None:
        for sub in [root, *root.rglob("*")]:
            os.lchown(sub, uid, uid)
    model = ScriptedModel([*(call_tool("Bash", {"command": c}) for c in commands), "done"])
    with LoopbackOpenAIServer(model) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RETINUE_"))}
        env.update(RETINUE_HOME=str(root / "data"), RETINUE_BLOCK_REAL_MODELS="1",
                   HOME=str(root / "home"), OPENAI_BASE_URL=server.base_url,
                   OPENAI_API_KEY=CANARY)  # fmt: skip
        argv = [sys.executable, "-m", "retinue", "run", "--model", "openai:m", "go"]
        if uid is not None:
            argv = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *argv]
        done = subprocess.run(argv, env=env, cwd=root / "ws", capture_output=True, text=True,
                              timeout=100, stdin=subprocess.DEVNULL, check=False)  # fmt: skip
        assert done.returncode == 0, done.stderr
    found = [m["content"] for m in server.requests[-1]["messages"] if m.get("role") == "tool"]
    return [str(r) for r in found]


@pytest.mark.parametrize("uid", USERS)
def test_a_confined_hook_meets_the_deny_rules_bash_meets(root: Path, uid: int | None) -> None:
    ws = root / "ws"
    (ws / "secrets").mkdir(parents=True)
    (ws / "secrets" / "key.txt").write_text("TOP-SECRET-VALUE\n")
    (ws / "protected").mkdir()
    (ws / "protected" / "f.txt").write_text("original\n")
    (ws / "lint.sh").write_text("echo lint ok\n")
    (root / "data").mkdir()
    (root / "home" / ".claude").mkdir(parents=True)
    (root / "home" / ".claude" / "settings.json").write_text(json.dumps({
        "permissions": {"deny": ["Read(./secrets/**)", "Edit(./protected/**)"]},
        "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "sh lint.sh"}]}]},
    }))  # fmt: skip
    rewrite = "cat secrets/key.txt > loot.txt; echo changed > protected/f.txt; true"
    [result] = retinue_run(root, uid, f"cat secrets/key.txt; echo '{rewrite}' > lint.sh")
    assert "TOP-SECRET" not in result  # (control: Bash itself meets the rules)
    loot = ws / "loot.txt"
    assert (ws / "protected" / "f.txt").read_text() == "original\n", "the hook edited it"
    assert not loot.exists() or "TOP-SECRET" not in loot.read_text(), "the hook read it"
