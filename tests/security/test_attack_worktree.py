"""Attack suite (issue 38 follow-up), families 1 and 5: ``retinue chat`` started in ``~``.

The workspace is the home folder (issue 38's own scenario). The sandbox hides ``~/.ssh``,
``~/.config``… and protects ``.claude``, but ``~/.gitconfig`` (and ``~/.bashrc``,
``~/.profile``, ``~/.local/bin``…) stay writable. A sandboxed ``Bash`` writes a smudge filter
into ``~/.gitconfig`` and commits ``.gitattributes`` (``* filter=x``) into the repository;
the model then delegates to an ``isolation: worktree`` role, and **Retinue's own** ``git
worktree add`` checks the commit out on the host, running the filter, which reads the key
from Retinue's ``/proc/<pid>/environ``. ``worktree.INERT`` switches off hooks, fsmonitor,
pagers… but not filters, and the global config comes from ``$HOME``. Suggested fix: run
Retinue's own git with ``GIT_CONFIG_GLOBAL=/dev/null`` (besides ``GIT_CONFIG_NOSYSTEM``) and
``core.attributesFile=/dev/null``, check out without filters (``--no-checkout``, then
``-c filter.<each configured>.smudge=`` or ``read-tree``/``checkout-index`` with
``GIT_ATTR_NOSYSTEM``); and protect ``$HOME``'s start-up files (``.gitconfig``, shell rc
files, ``.local/bin``) as :data:`PROTECTED` when ``$HOME`` lies in the workspace. Runs as the
current user and, when that is root, as ``nobody``.
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
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed"),
]

CANARY = "sk-canary-attack-worktree-5c4b3a"
ROLE = "---\nname: iso\ndescription: looks around\ntools: Read\nisolation: worktree\n---\nLook."


@pytest.fixture
def root() -> Iterator[Path]:
    """A folder outside /tmp (the sandbox has its own /tmp) that ``nobody`` may use too."""
    path = Path(tempfile.mkdtemp(prefix="retinue-atk-", dir="/var/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def git(ws: Path, *args: str) -> None:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(ws.parent)}
    argv = ["git", "-C", str(ws), "-c", "user.email=a@b", "-c", "user.name=a", *args]
    subprocess.run(argv, env=env, check=True, capture_output=True, timeout=60)


@pytest.mark.parametrize("uid", USERS)
def test_retinues_own_worktree_runs_no_filter_the_sandbox_planted(
    root: Path, uid: int | None
) -> None:
    ws, leak = root / "home", root / "leak"  # the workspace is the home folder
    ws.mkdir()
    (root / "data" / "agents").mkdir(parents=True)
    (root / "data" / "agents" / "iso.md").write_text(ROLE)  # the user's own role
    (ws / "README.md").write_text("hello\n")
    git(ws, "init", "-q")
    git(ws, "add", "README.md")
    git(ws, "commit", "-q", "-m", "first")
    if uid is not None:
        for sub in [root, *root.rglob("*")]:
            os.lchown(sub, uid, uid)
    config = f'[filter "x"]\n\tsmudge = "cat /proc/[0-9]*/environ > {leak} 2>/dev/null; cat"\n'
    plant = (
        f"cat > ~/.gitconfig <<'EOF'\n{config}EOF\n"
        "echo '* filter=x' > .gitattributes && git add .gitattributes && "
        "git -c user.email=a@b -c user.name=a commit -q -m attributes"
    )
    steps = [call_tool("Bash", {"command": plant}),
             call_tool("SubAgent", {"task": "look", "role": "iso"}), "looked", "done"]  # fmt: skip
    with LoopbackOpenAIServer(ScriptedModel(steps)) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RETINUE_"))}
        env.update(RETINUE_HOME=str(root / "data"), RETINUE_BLOCK_REAL_MODELS="1",
                   HOME=str(ws), OPENAI_BASE_URL=server.base_url,
                   OPENAI_API_KEY=CANARY)  # fmt: skip
        argv = [sys.executable, "-m", "retinue", "run", "--model", "openai:m", "go"]
        if uid is not None:
            argv = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *argv]
        # (the exit code is not looked at: the sub-agent's memory consolidation then asks
        # the scripted model for calls it was not given)
        subprocess.run(argv, env=env, cwd=ws, capture_output=True, text=True, timeout=100,
                       stdin=subprocess.DEVNULL, check=False)  # fmt: skip
    # ~/.gitconfig is read-only to the sandbox when home is inside the workspace
    assert not (ws / ".gitconfig").exists() or "filter" not in (ws / ".gitconfig").read_text()
    assert not (leak.exists() and CANARY in leak.read_text(errors="replace")), (
        "a filter the sandbox planted ran on the host and read the key"
    )


@pytest.mark.parametrize("uid", USERS)
def test_a_worktree_roles_shell_meets_the_workspaces_read_rules(
    root: Path, uid: int | None
) -> None:
    """An ``isolation: worktree`` sub-agent's ``Bash`` runs with the worktree as its
    workspace: the rule paths are looked for under the worktree (``confine._fixed_prefix``
    joins ``./secrets`` to it), while the real workspace stays readable through the
    read-only root, so ``cat <workspace>/secrets/key.txt`` reads what ``Read(./secrets/**)``
    denies (its ``Read`` tool is refused). Suggested fix: anchor rule paths to the workspace
    the rules were written for (the parent's), and hide them in every sandbox of the run."""
    ws = root / "ws"
    ws.mkdir()
    (root / "data" / "agents").mkdir(parents=True)
    role = ROLE.replace("tools: Read", "tools: Bash, Read")
    (root / "data" / "agents" / "iso.md").write_text(role)
    (ws / "README.md").write_text("hello\n")
    git(ws, "init", "-q")
    git(ws, "add", "README.md")
    git(ws, "commit", "-q", "-m", "first")
    (ws / "secrets").mkdir()
    (ws / "secrets" / "key.txt").write_text("TOP-SECRET-VALUE\n")
    (ws / ".claude").mkdir()
    (ws / ".claude" / "settings.json").write_text(
        '{"permissions": {"deny": ["Read(./secrets/**)"]}}'
    )
    if uid is not None:
        for sub in [root, *root.rglob("*")]:
            os.lchown(sub, uid, uid)
    steal = call_tool("Bash", {"command": f"cat {ws}/secrets/key.txt"})
    steps = [call_tool("SubAgent", {"task": "look", "role": "iso"}), steal, "looked", "done"]
    with LoopbackOpenAIServer(ScriptedModel(steps)) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RETINUE_"))}
        env.update(RETINUE_HOME=str(root / "data"), RETINUE_BLOCK_REAL_MODELS="1",
                   HOME=str(root), OPENAI_BASE_URL=server.base_url,
                   OPENAI_API_KEY=CANARY)  # fmt: skip
        argv = [sys.executable, "-m", "retinue", "run", "--model", "openai:m", "go"]
        if uid is not None:
            argv = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *argv]
        subprocess.run(argv, env=env, cwd=ws, capture_output=True, text=True, timeout=100,
                       stdin=subprocess.DEVNULL, check=False)  # fmt: skip
    read = [str(m["content"]) for r in server.requests for m in r["messages"]
            if m.get("role") == "tool"]  # fmt: skip
    assert any("exit code" in r for r in read), read  # (the sub-agent's Bash did run)
    assert not any("TOP-SECRET-VALUE" in r for r in read), "the sub-agent's shell read it"
