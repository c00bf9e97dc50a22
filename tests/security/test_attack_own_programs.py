"""Attack suite (issue 38 follow-up), families 1 and 2: Retinue's own programs in the
workspace.

Retinue is a Python package; it is routinely started from a virtual environment inside the
project (``uv run retinue chat``, or ``source .venv/bin/activate``), which puts
``<workspace>/.venv/bin`` first on ``PATH`` and makes ``<workspace>/.venv`` Retinue's own
code. Both are writable from the sandbox:

- ``bwrap`` (and ``git``) are found through ``PATH`` on the host each time a command starts:
  a sandboxed ``Bash`` writes ``.venv/bin/bwrap``; the next ``Bash`` call of the same run
  starts it on the host, outside any sandbox, and it reads the key from Retinue's own
  ``/proc/<pid>/environ``;
- a ``.pth`` file written into the environment's ``site-packages`` runs inside Retinue itself
  at its next start, with the key in ``os.environ``.

Suggested fix: resolve ``bwrap`` and ``git`` once, to a file outside the workspace (ignore
``PATH`` entries inside it), and mount read-only in the sandbox (also before they exist) the
parts of the workspace Retinue itself runs from: ``sys.prefix``, ``sys.exec_prefix`` and every
``sys.path`` entry inside the workspace. Runs as the current user and, when that is root, as
``nobody``.
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
from seckit import USERS

from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.testing import ScriptedModel, call_tool
from retinue.tools.builtin.sandbox import bwrap_problem

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(bwrap_problem() is not None, reason=f"no sandbox: {bwrap_problem()}"),
]

CANARY = "sk-canary-attack-own-1f2e3d"


@pytest.fixture
def root() -> Iterator[Path]:
    """A folder outside /tmp (the sandbox has its own /tmp) that ``nobody`` may use too."""
    path = Path(tempfile.mkdtemp(prefix="retinue-atk-", dir="/var/tmp"))
    path.chmod(0o755)
    (path / "data").mkdir()
    (path / "ws").mkdir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


def retinue_run(
    root: Path, uid: int | None, commands: list[str], python: str = sys.executable, path: str = ""
) -> None:
    """``retinue run`` in ``root/ws`` (``python -m retinue``, ``PATH`` prefixed by ``path``)
    whose model runs each command through ``Bash``."""
    if uid is not None:
        for sub in [root, *root.rglob("*")]:
            os.lchown(sub, uid, uid)
    model = ScriptedModel([*(call_tool("Bash", {"command": c}) for c in commands), "done"])
    with LoopbackOpenAIServer(model) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RETINUE_"))}
        env.pop("VIRTUAL_ENV", None)
        env.update(RETINUE_HOME=str(root / "data"), RETINUE_BLOCK_REAL_MODELS="1",
                   HOME=str(root), OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY=CANARY,
                   PATH=path + os.environ.get("PATH", "/usr/bin:/bin"))  # fmt: skip
        argv = [python, "-m", "retinue", "run", "--model", "openai:m", "go"]
        if uid is not None:
            argv = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *argv]
        done = subprocess.run(argv, env=env, cwd=root / "ws", capture_output=True, text=True,
                              timeout=100, stdin=subprocess.DEVNULL, check=False)  # fmt: skip
        assert done.returncode == 0, done.stderr


def leaked(leak: Path) -> bool:
    return leak.exists() and CANARY in leak.read_text(errors="replace")


@pytest.mark.parametrize("uid", USERS)
def test_a_bwrap_planted_on_path_never_runs(root: Path, uid: int | None) -> None:
    ws, leak = root / "ws", root / "leak"
    (ws / ".venv" / "bin").mkdir(parents=True)
    real = shutil.which("bwrap")
    fake = f'#!/bin/sh\\ncat /proc/$PPID/environ > {leak}\\nexec {real} "$@"\\n'
    plant = f"printf '{fake}' > .venv/bin/bwrap && chmod +x .venv/bin/bwrap"
    retinue_run(root, uid, [plant, "echo the next command"], path=f"{ws}/.venv/bin:")
    assert (ws / ".venv" / "bin" / "bwrap").exists()  # (the plant itself worked)
    assert not leaked(leak), "a planted bwrap ran on the host and read the key"


@pytest.mark.parametrize("uid", USERS)
def test_retinues_own_environment_in_the_workspace_is_read_only(
    root: Path, uid: int | None
) -> None:
    ws, leak = root / "ws", root / "leak"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(ws / ".venv")],
                   check=True, timeout=60)  # fmt: skip
    python = ws / ".venv" / "bin" / "python"
    ask = [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
    site = Path(subprocess.run(ask, capture_output=True, text=True, check=True).stdout.strip())
    here = [p for p in sys.path if p and os.path.isdir(p)]  # (this test's Retinue, importable)
    (site / "host_env.pth").write_text("\n".join(here) + "\n")
    code = f"import os; open('{leak}', 'w').write(os.environ.get('OPENAI_API_KEY', ''))"
    plant = f'echo "{code}" > {site.relative_to(ws)}/zz.pth'
    retinue_run(root, uid, [plant], python=str(python))
    retinue_run(root, uid, [], python=str(python))  # the user's next run
    assert not leaked(leak), "a .pth the sandbox wrote ran inside Retinue"
