"""``retinue mcp list`` and the CLI's MCP servers as a user meets them: real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mcp_kit import alive, needs_sandbox

from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.testing import ScriptedModel, call_tool

pytestmark = pytest.mark.timeout(300)  # bounds a hang; a loaded machine starts servers slowly

WAIT_S = 60.0  # polled: returns once ready, so generous costs nothing on a quick machine
ALLOW_ALL = ["--permission-mode", "bypassPermissions"]  # nobody at a terminal to ask


def env_for(tmp_path: Path, server: LoopbackOpenAIServer | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RETINUE_"))}
    env["RETINUE_HOME"] = str(tmp_path / "home")
    env["RETINUE_BLOCK_REAL_MODELS"] = "1"
    if server is not None:
        env["OPENAI_BASE_URL"] = server.base_url
        env["OPENAI_API_KEY"] = "test-key"
    return env


def retinue(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "retinue", *args]
    return subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=3 * WAIT_S)


def server_pids(marks: Path) -> list[int]:
    """The PIDs the servers saw (in their own PID namespace when they run in a sandbox)."""
    return [int(p.name.removeprefix("pid-")) for p in marks.glob("pid-*")]


def host_processes(marks: Path) -> list[int]:
    """The host's PIDs of live processes started for this test's server (its environment
    names ``marks``): the server, and the sandbox around it."""
    mark = f"ECHO_MARKS={marks}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if mark in environ and entry.name.isdigit() and alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def gone(marks: Path, within: float = WAIT_S) -> bool:
    deadline = time.monotonic() + within
    while host_processes(marks) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not host_processes(marks)


@needs_sandbox
def test_mcp_list_shows_each_server_its_state_and_tools(tmp_path: Path, workspace: Path) -> None:
    proc = retinue(["mcp", "list"], workspace, env_for(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "echo: " in proc.stdout and "[running]" in proc.stdout
    assert "mcp__echo__echo" in proc.stdout and "mcp__time__get_current_time" in proc.stdout


def test_a_bad_server_definition_is_one_line(tmp_path: Path, workspace: Path) -> None:
    (workspace / ".mcp.json").write_text(json.dumps({"mcpServers": {"web": {"type": "http"}}}))
    proc = retinue(["mcp", "list"], workspace, env_for(tmp_path))
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        f"error: {workspace / '.mcp.json'}: MCP server 'web': url: Field required"
    ]
    assert "Traceback" not in proc.stderr


@needs_sandbox
def test_no_server_process_survives_the_cli(tmp_path: Path, workspace: Path, marks: Path) -> None:
    model = ScriptedModel([call_tool("mcp__echo__pid"), "done"])
    with LoopbackOpenAIServer(model) as server:
        proc = retinue(
            ["run", "--model", "openai:test", *ALLOW_ALL, "go"],
            workspace,
            env_for(tmp_path, server),
        )
    assert proc.returncode == 0, proc.stderr
    (pid,) = server_pids(marks)
    assert model.calls[1].messages[-1].content == str(pid)
    assert gone(marks)


@needs_sandbox
def test_no_server_process_survives_sigterm(tmp_path: Path, workspace: Path, marks: Path) -> None:
    model = ScriptedModel([call_tool("mcp__echo__sleep", {"seconds": 60}), "done"])
    with LoopbackOpenAIServer(model) as server:
        cmd = [sys.executable, "-m", "retinue", "run", "--model", "openai:test", *ALLOW_ALL, "go"]
        proc = subprocess.Popen(cmd, env=env_for(tmp_path, server), cwd=workspace,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        try:
            deadline = time.monotonic() + 2 * WAIT_S  # `retinue run` and its servers starting
            while not (marks / "sleep-started").exists() and time.monotonic() < deadline:
                time.sleep(0.1)
            assert (marks / "sleep-started").exists()
            assert host_processes(marks)  # the server runs: the check below means something
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=WAIT_S)
        finally:
            proc.kill()
            proc.wait()
    assert gone(marks)
