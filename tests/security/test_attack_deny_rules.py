"""Attack suite (issue 38 follow-up), family 4: Read/Edit deny rules against the sandbox's
mounts, as a black box.

``retinue run`` in ``default`` mode, nobody to approve, a canary ``OPENAI_API_KEY``; a
scripted model makes the attacker's ``Bash`` calls. The rules name a folder one level down
(``./a/secrets/**``, ``./a/protected/**``). The sandbox mounts the folder the rule names,
not its parent, so one call renames the parent (``mv a b``) and the next, whose mounts are
computed from the rules again, finds nothing at ``a/`` to hide or protect: it reads the
secret and rewrites the protected file through ``b/``, then puts ``a`` back. Suggested fix:
make every directory between the workspace and a rule's path a mount point too (as
``Sandbox._protect`` already does for a data directory inside the workspace), so it cannot be
renamed while commands run. Runs as the current user and, when that is root, as ``nobody``.
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

CANARY = "sk-canary-attack-deny-7f6e5d"


@pytest.fixture
def root() -> Iterator[Path]:
    """A folder outside /tmp (the sandbox has its own /tmp) that ``nobody`` may use too."""
    path = Path(tempfile.mkdtemp(prefix="retinue-atk-", dir="/var/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def attack(root: Path, ws: Path, uid: int | None, *commands: str) -> list[str]:
    """``retinue run`` in ``ws`` whose model runs each command through ``Bash`` in turn;
    the tool results it read."""
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
        argv = [sys.executable, "-m", "retinue", "run", "--model", "openai:m", "go"]
        if uid is not None:
            argv = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *argv]
        done = subprocess.run(argv, env=env, cwd=ws, capture_output=True, text=True,
                              timeout=100, stdin=subprocess.DEVNULL, check=False)  # fmt: skip
        assert done.returncode == 0, done.stderr
    found = [m["content"] for m in server.requests[-1]["messages"] if m.get("role") == "tool"]
    assert len(found) == len(commands), found
    return [str(r) for r in found]


@pytest.fixture
def ws(root: Path) -> Path:
    ws = root / "ws"
    (ws / "a" / "secrets").mkdir(parents=True)
    (ws / "a" / "secrets" / "key.txt").write_text("TOP-SECRET-VALUE\n")
    (ws / "a" / "protected").mkdir()
    (ws / "a" / "protected" / "f.txt").write_text("original\n")
    (ws / ".claude").mkdir()
    rules = {"permissions": {"deny": ["Read(./a/secrets/**)", "Edit(./a/protected/**)"]}}
    (ws / ".claude" / "settings.json").write_text(json.dumps(rules))
    return ws


@pytest.mark.parametrize("uid", USERS)
def test_control_the_rules_hold_in_one_call(root: Path, ws: Path, uid: int | None) -> None:
    results = attack(
        root, ws, uid,
        "cat a/secrets/key.txt; echo changed > a/protected/f.txt; "
        "mv a b && cat b/secrets/key.txt; echo changed > b/protected/f.txt; mv b a; true",
    )  # fmt: skip
    assert "TOP-SECRET-VALUE" not in results[0]
    assert (ws / "a" / "protected" / "f.txt").read_text() == "original\n"


@pytest.mark.parametrize("uid", USERS)
def test_renaming_the_rules_parent_folder_reads_the_secret(
    root: Path, ws: Path, uid: int | None
) -> None:
    results = attack(root, ws, uid, "mv a b", "cat b/secrets/key.txt; mv b a")
    assert (ws / "a" / "secrets" / "key.txt").exists()  # put back: nothing looks moved
    assert "TOP-SECRET-VALUE" not in results[1]


@pytest.mark.parametrize("uid", USERS)
def test_renaming_the_rules_parent_folder_edits_the_protected_file(
    root: Path, ws: Path, uid: int | None
) -> None:
    attack(root, ws, uid, "mv a b", "echo changed > b/protected/f.txt; mv b a")
    assert (ws / "a" / "protected" / "f.txt").read_text() == "original\n"


@pytest.mark.xfail(strict=True, reason="escape: an Edit rule binds only paths that exist")
@pytest.mark.parametrize("uid", USERS)
def test_an_edit_rule_for_paths_not_there_yet_binds_the_shell(root: Path, uid: int | None) -> None:
    """``Edit(./.github/workflows/**)`` in a repository without workflows yet: the ``Write``
    tool is refused, the shell is not (CI would run the new workflow with its secrets).
    Suggested fix: mount a read-only placeholder at the rule's fixed folder when it is missing,
    as ``Sandbox._protect`` does for :data:`PROTECTED`."""
    ws = root / "ws"
    (ws / ".claude").mkdir(parents=True)
    rules = {"permissions": {"deny": ["Edit(./.github/workflows/**)", "Edit(./deploy.yaml)"]}}
    (ws / ".claude" / "settings.json").write_text(json.dumps(rules))
    attack(root, ws, uid,
           "mkdir -p .github/workflows && echo 'on: push' > .github/workflows/x.yml; "
           "echo 'steps: []' > deploy.yaml; true")  # fmt: skip
    assert not (ws / ".github" / "workflows" / "x.yml").exists()
    assert not (ws / "deploy.yaml").exists()


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
@pytest.mark.xfail(strict=True, reason="escape: a tracked secret read from git's objects")
@pytest.mark.parametrize("uid", USERS)
def test_a_read_rule_keeps_a_tracked_file_out_of_gits_history_too(
    root: Path, ws: Path, uid: int | None
) -> None:
    """The secret is committed (as ``.env`` files and keys often are); the sandbox hides the
    file but ``.git/objects`` holds it too. Suggested fix: hide ``.git/objects`` (and packs)
    from commands while a Read deny rule matches a tracked path, or refuse to auto-allow
    ``Bash`` then; at the least, say so in the README."""
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(root)}
    for args in (["init", "-q"], ["add", "a"], ["commit", "-q", "-m", "x"]):
        subprocess.run(["git", "-C", str(ws), "-c", "user.email=a@b", "-c", "user.name=a",
                        *args], env=env, check=True, capture_output=True, timeout=60)  # fmt: skip
    results = attack(root, ws, uid, "git show HEAD:a/secrets/key.txt; git grep -h SECRET HEAD")
    assert "TOP-SECRET-VALUE" not in results[0]
