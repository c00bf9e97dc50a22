"""The Bash tool's sandbox, with the real bubblewrap: what a command can and cannot reach.

Each escape is attempted by a real command; the assertions look at the host afterwards
(the file is not there, the process is gone), not only at what the command printed. The
fallback without bubblewrap is exercised with ``RETINUE_BWRAP`` naming a missing program.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_shell import STRAY_S, WAIT_S, Call, _pids_running, _wait_for

from retinue.messages import ToolCall
from retinue.tools import ToolContext, ToolRegistry
from retinue.tools.builtin.sandbox import Sandbox, bwrap_problem, safe_environment

pytestmark = pytest.mark.timeout(60)

needs_bwrap = pytest.mark.skipif(
    bwrap_problem() is not None, reason=f"no sandbox here: {bwrap_problem()}"
)

PROVIDER_KEY = "sk-test-provider-key-never-in-a-shell"


@pytest.fixture(autouse=True)
def secrets_in_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Provider keys in the agent's environment, and a home holding the usual secrets."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
    (home / ".aws").mkdir()
    (home / ".aws" / "credentials").write_text("aws_secret_access_key = AWSSECRET\n")
    (home / ".netrc").write_text("machine x password NETRCSECRET\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("OPENAI_API_KEY", PROVIDER_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", PROVIDER_KEY)
    monkeypatch.setenv("GITHUB_TOKEN", PROVIDER_KEY)
    monkeypatch.delenv("RETINUE_SHELL_NETWORK", raising=False)
    monkeypatch.delenv("RETINUE_BWRAP", raising=False)
    return home


@pytest.fixture
def outside_root() -> Iterator[Path]:
    """A directory outside /tmp (the sandbox has its own /tmp), removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="retinue-outside-", dir="/var/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_the_environment_is_an_allow_list() -> None:
    env = safe_environment({"PATH": "/bin", "LC_ALL": "C", "OPENAI_API_KEY": "k", "AWS_X": "y"})
    assert env == {"PATH": "/bin", "LC_ALL": "C"}
    assert safe_environment({})["PATH"]


async def test_no_secret_reaches_a_command_environment(call: Call) -> None:
    result = await call("Bash", command="env; cat /proc/self/environ")
    assert not result.is_error
    assert PROVIDER_KEY not in result.content
    assert "OPENAI_API_KEY" not in result.content
    assert "PATH=" in result.content


@needs_bwrap
async def test_a_command_cannot_write_outside_the_workspace(
    call: Call, ws: Path, outside_root: Path
) -> None:
    target = outside_root / "escaped.txt"
    result = await call("Bash", command=f"touch inside.txt; echo x > {target}")
    assert result.is_error
    assert "Read-only file system" in result.content
    assert not target.exists()
    assert (ws / "inside.txt").exists()  # the workspace itself is writable
    cd_out = await call("Bash", command=f"cd / && touch {outside_root}/b.txt")
    assert cd_out.is_error
    assert not (outside_root / "b.txt").exists()


@needs_bwrap
async def test_secrets_and_the_data_directory_are_invisible(
    registry: ToolRegistry, ws: Path, secrets_in_environment: Path
) -> None:
    data = ws / ".retinue-home"  # inside the workspace, and still hidden
    data.mkdir()
    (data / "memory.db").write_text("MEMORYSECRET")
    ctx = ToolContext(agent_id="a", workspace=ws, data_dir=data)
    command = (
        "cat ~/.ssh/id_ed25519 ~/.aws/credentials ~/.netrc .retinue-home/memory.db; "
        "ls -A ~/.ssh .retinue-home; grep -r SECRET ~ . 2>/dev/null; true"
    )
    call = ToolCall("c", "Bash", json.dumps({"command": command}))
    result = await registry.execute(call, ctx)
    for secret in ("PRIVATE KEY", "AWSSECRET", "NETRCSECRET", "MEMORYSECRET"):
        assert secret not in result.content
    assert (data / "memory.db").read_text() == "MEMORYSECRET"  # hidden, not harmed


@needs_bwrap
async def test_no_network_unless_configured(call: Call, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        connect = f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected"
        refused = await call("Bash", command=connect)
        assert refused.is_error
        assert "connected" not in refused.content
        monkeypatch.setenv("RETINUE_SHELL_NETWORK", "1")
        allowed = await call("Bash", command=connect)
        assert not allowed.is_error, allowed.content
        assert "connected" in allowed.content


@needs_bwrap
async def test_sockets_under_run_are_out_of_reach(call: Call) -> None:
    path = Path(f"/run/retinue-test-{os.getpid()}.sock")
    try:
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(str(path))
    except OSError as exc:
        pytest.skip(f"cannot make a socket in /run: {exc}")
    with listener:
        listener.listen()
        try:
            probe = f"test -S {path} && echo REACHABLE; ls /run"
            result = await call("Bash", command=probe)
        finally:
            os.unlink(path)
    assert "REACHABLE" not in result.content
    assert path.name not in result.content


@needs_bwrap
async def test_a_command_cannot_see_or_signal_retinue(call: Call) -> None:
    result = await call("Bash", command=f"kill -0 {os.getpid()} && echo alive; ls /proc | wc -l")
    assert "alive" not in result.content


@needs_bwrap
async def test_a_process_that_leaves_the_group_dies_with_the_sandbox(call: Call) -> None:
    command = f"setsid sleep {STRAY_S}.871 > /dev/null 2>&1 & echo started"
    result = await call("Bash", command=command)
    assert "started" in result.content
    assert await _wait_for(lambda: _pids_running("sleep", f"{STRAY_S}.871") == [])


@needs_bwrap
def test_hidden_paths_around_the_workspace_are_mounted_before_it(tmp_path: Path) -> None:
    home = tmp_path / "h"
    (home / ".config" / "proj").mkdir(parents=True)
    ws = home / ".config" / "proj"
    argv = Sandbox(workspace=ws, hidden=(home / ".config",)).argv("true")
    assert argv.index(str(home / ".config")) < argv.index("--bind")
    assert argv[-3:] == ["bash", "-c", "true"]
    assert "--die-with-parent" in argv and "--unshare-all" in argv
    assert "--share-net" not in argv


async def test_without_bubblewrap_the_tool_says_so_once_and_still_drops_secrets(
    call: Call, monkeypatch: pytest.MonkeyPatch, ws: Path
) -> None:
    monkeypatch.setenv("RETINUE_BWRAP", f"/nonexistent/bwrap-{os.getpid()}-{id(ws)}")
    first = await call("Bash", command="env")
    second = await call("Bash", command="env")
    assert "no sandbox" in first.content and "not installed" in first.content
    assert "no sandbox" not in second.content
    for result in (first, second):
        assert not result.is_error
        assert PROVIDER_KEY not in result.content


@needs_bwrap
async def test_cancelling_a_sandboxed_command_leaves_nothing_behind(
    registry: ToolRegistry, ctx: ToolContext
) -> None:
    command = f"setsid sleep {STRAY_S}.273 & sleep {STRAY_S}.273 & wait"
    task = asyncio.create_task(
        registry.execute(ToolCall("c", "Bash", json.dumps({"command": command})), ctx)
    )
    assert await _wait_for(lambda: len(_pids_running("sleep", f"{STRAY_S}.273")) == 2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, WAIT_S)
    assert await _wait_for(lambda: _pids_running("sleep", f"{STRAY_S}.273") == [])


# -- what the workspace runs later: read-only inside the writable workspace ------------------

ESCAPES = {
    ".mcp.json": "echo '{\"mcpServers\": {}}' > .mcp.json",
    ".retinue": "mkdir -p .retinue/agents && echo x > .retinue/agents/evil.md",
    ".claude": "mkdir -p .claude/agents && echo x > .claude/agents/evil.md",
    ".claude/settings.json": "mkdir -p .claude && echo '{}' > .claude/settings.json",
    ".git": "git init -q . 2>&1 || mkdir -p .git/hooks",
}


@needs_bwrap
@pytest.mark.parametrize("target", list(ESCAPES))
async def test_what_the_workspace_runs_cannot_be_created_from_the_sandbox(
    call: Call, ws: Path, target: str
) -> None:
    command = f"if {ESCAPES[target]}; then echo WROTE; fi; echo ok > elsewhere.txt"
    result = await call("Bash", command=command)
    assert "WROTE" not in result.content and not result.is_error, result.content
    assert (ws / "elsewhere.txt").read_text() == "ok\n"  # and every other write worked
    assert not (ws / target).exists()  # nothing made, and no placeholder left behind
    assert os.listdir(ws) == ["elsewhere.txt"]


@needs_bwrap
async def test_what_exists_is_read_only_and_readable(call: Call, ws: Path) -> None:
    (ws / ".mcp.json").write_text('{"mcpServers": {}}')
    (ws / ".claude" / "agents").mkdir(parents=True)
    (ws / ".claude" / "agents" / "a.md").write_text("role\n")
    (ws / ".git" / "hooks").mkdir(parents=True)
    (ws / ".git" / "config").write_text("[core]\n")
    (ws / "src").mkdir()
    attempts = [
        "echo x >> .mcp.json",
        "rm -f .mcp.json",
        "mv .claude gone",
        "echo x > .claude/agents/a.md",
        "echo '#!/bin/sh' > .git/hooks/pre-commit",
        "git config core.hooksPath evil",
        "echo x >> .git/config",
        "mv .git .git-old",  # and make a repository of its own in its place
        "mkdir -p .git/modules/sub/hooks",  # a submodule's hooks
    ]
    for attempt in attempts:
        result = await call("Bash", command=attempt)
        assert result.is_error, (attempt, result.content)
    shown = await call("Bash", command="cat .mcp.json .claude/agents/a.md; echo y > src/b.py")
    assert not shown.is_error and '{"mcpServers": {}}' in shown.content
    assert (ws / ".mcp.json").read_text() == '{"mcpServers": {}}'
    assert (ws / ".claude" / "agents" / "a.md").read_text() == "role\n"
    assert os.listdir(ws / ".git" / "hooks") == []
    assert (ws / ".git" / "config").read_text() == "[core]\n"
    assert (ws / "src" / "b.py").read_text() == "y\n"
    assert sorted(os.listdir(ws / ".git")) == ["config", "hooks"]  # no placeholder left


@needs_bwrap
@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
async def test_git_still_commits_in_the_sandbox(call: Call, ws: Path) -> None:
    refused = await call("Bash", command="git init -q .")
    assert refused.is_error and not (ws / ".git").exists()  # no repository made from inside
    init = ["git", "init", "-q", str(ws)]
    await asyncio.to_thread(subprocess.run, init, check=True)
    commit = "echo a > a.txt && git add a.txt && git -c user.name=a -c user.email=a@b "
    done = await call("Bash", command=commit + "commit -qm one && git log --format=%s")
    assert not done.is_error and "one" in done.content, done.content


@needs_bwrap
async def test_a_data_directory_inside_the_workspace_is_hidden_even_before_it_exists(
    ws: Path, registry: ToolRegistry
) -> None:
    data = ws / ".retinue-data"
    ctx = ToolContext(agent_id="a", workspace=ws, data_dir=data)
    command = "mkdir -p .retinue-data && echo '{}' > .retinue-data/trust.json; ls -a .retinue-data"
    await registry.execute(ToolCall("c", "Bash", json.dumps({"command": command})), ctx)
    assert data.is_dir() and os.listdir(data) == []  # made by Retinue, written by nobody
    (data / "trust.json").write_text("approved\n")
    seen = await registry.execute(
        ToolCall("c", "Bash", json.dumps({"command": "cat .retinue-data/trust.json"})), ctx
    )
    assert "approved" not in seen.content


@needs_bwrap
async def test_placeholders_stay_while_another_command_runs(call: Call, ws: Path) -> None:
    wait = "touch started; while [ ! -e go ]; do sleep 0.05; done"
    slow = asyncio.ensure_future(call("Bash", command=f"{wait}; echo x > .mcp.json"))
    assert await _wait_for(lambda: (ws / "started").exists())
    quick = await call("Bash", command="echo x > .mcp.json")
    assert quick.is_error
    assert (ws / ".mcp.json").exists()  # not removed from under the slow command's mount
    (ws / "go").touch()
    assert (await slow).is_error  # still read-only for it
    assert not (ws / ".mcp.json").exists()


@needs_bwrap
async def test_a_nested_data_directory_cannot_be_swapped_for_one_of_the_command_s(
    ws: Path, registry: ToolRegistry
) -> None:
    data = ws / "a" / "b" / "data"
    ctx = ToolContext(agent_id="a", workspace=ws, data_dir=data)
    swap = "mv a a2; mv a/b a/b2; mkdir -p x/b/data && echo planted > x/b/data/trust.json"
    swap += " && mv x a; echo done"
    result = await registry.execute(ToolCall("c", "Bash", json.dumps({"command": swap})), ctx)
    assert "done" in result.content or result.is_error
    assert not (ws / "a2").exists() and not (ws / "a" / "b2").exists()  # neither renamed
    assert os.listdir(data) == []  # the data directory is still Retinue's, and empty
