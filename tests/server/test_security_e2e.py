"""The security scenarios end to end: a real ``retinue serve`` process on 127.0.0.1 whose
model (a ScriptedModel behind the loopback OpenAI server) obeys "run this" with Bash.

- no token: 401; a foreign Host: 421; a foreign Origin: 403;
- with the token, the sandboxed Bash cannot write outside the workspace, cannot read the
  provider keys, the user's secrets or the server's own token;
- after SIGTERM to the server, no process a command started is left, not even one that
  left its process group with ``setsid``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from serverkit import wait_for
from test_cli_remote import env_for

from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.messages import ToolResultMessage
from retinue.testing import ScriptedModel, call_tool
from retinue.tools.builtin.sandbox import bwrap_problem

pytestmark = [
    pytest.mark.timeout(300),  # a hang bound: `retinue serve` starts slowly on a loaded machine
    pytest.mark.skipif(bwrap_problem() is not None, reason=f"no sandbox: {bwrap_problem()}"),
]

OPENAI_KEY = "sk-e2e-openai-key-must-stay-secret"
ANTHROPIC_KEY = "sk-ant-e2e-anthropic-key-must-stay-secret"
SLEEP = ("sleep", "347.319")  # longer than any wait for it to be killed
SLEEPING = " ".join(SLEEP)


def _pids_running(*argv: str) -> list[int]:
    wanted = "\0".join(argv).encode() + b"\0"
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "cmdline").read_bytes() == wanted:
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.fixture
def outside() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="retinue-e2e-", dir="/var/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _start_serve(
    tmp_path: Path, provider_url: str, home: Path
) -> tuple[subprocess.Popen[str], str, str]:
    """``retinue serve`` in the workspace ``tmp_path/ws``, data in ``tmp_path/home``, the
    user's home (with an SSH key) at ``home``."""
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("SSH-PRIVATE-KEY\n")
    env = env_for(tmp_path) | {
        "OPENAI_BASE_URL": provider_url,
        "OPENAI_API_KEY": OPENAI_KEY,
        "ANTHROPIC_API_KEY": ANTHROPIC_KEY,
        "HOME": str(home),
    }
    argv = [sys.executable, "-m", "retinue", "serve", "--port", "0", "-m", "openai:test", "-q"]
    workspace = tmp_path / "ws"
    workspace.mkdir()
    proc = subprocess.Popen(argv, env=env, cwd=workspace, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    banner = proc.stderr.readline()
    assert banner.startswith("retinue serving openai:test on http://127.0.0.1:"), banner
    proc.stderr.readline()  # how to use the token
    token = (tmp_path / "home" / "server-token").read_text().strip()
    return proc, banner.split()[-1], token


def _tool_results(model: ScriptedModel) -> str:
    seen = [m.content for m in model.calls[-1].messages if isinstance(m, ToolResultMessage)]
    return "\n".join(seen)


def test_the_security_scenarios_against_a_live_server(tmp_path: Path, outside: Path) -> None:
    attack = (
        f"echo pwned > {outside}/written.txt; cd / && touch {outside}/from-root.txt; "
        "echo x >> ~/.bashrc; "
        f"env; cat /proc/*/environ; cat ~/.ssh/id_ed25519 {tmp_path}/home/server-token; "
        "echo ATTACK-RAN"
    )
    model = ScriptedModel(
        [
            call_tool("Bash", {"command": attack}),
            "done",
            call_tool("Bash", {"command": f"{SLEEPING} & setsid {SLEEPING} & wait"}),
            "never reached",
        ]
    )
    with LoopbackOpenAIServer(model) as provider:
        proc, url, token = _start_serve(tmp_path, provider.base_url, outside / "user")
        try:
            auth = {"Authorization": f"Bearer {token}"}
            message = f"{url}/v1/conversations/a/messages"
            assert httpx.post(message, json={"content": "run id"}).status_code == 401
            foreign_host = {**auth, "Host": "attacker.example"}
            assert (
                httpx.post(message, json={"content": "x"}, headers=foreign_host).status_code == 421
            )
            foreign_origin = {**auth, "Origin": "http://attacker.example"}
            assert (
                httpx.post(message, json={"content": "x"}, headers=foreign_origin).status_code
                == 403
            )
            assert model.calls == []  # nothing reached the agent

            reply = httpx.post(message, json={"content": "run it"}, headers=auth, timeout=60)
            assert reply.status_code == 200, reply.text
            assert reply.json()["content"] == "done"
            seen = _tool_results(model)
            assert "ATTACK-RAN" in seen
            assert "Read-only file system" in seen
            assert not (outside / "written.txt").exists()
            assert not (outside / "from-root.txt").exists()
            assert not (outside / "user" / ".bashrc").exists()
            for secret in (OPENAI_KEY, ANTHROPIC_KEY, "SSH-PRIVATE-KEY", token):
                assert secret not in seen

            with ThreadPoolExecutor(1) as pool:
                hanging = pool.submit(
                    httpx.post,
                    f"{url}/v1/conversations/b/messages",
                    json={"content": "sleep"},
                    headers=auth,
                    timeout=60,
                )
                wait_for(lambda: len(_pids_running(*SLEEP)) == 2)
                proc.send_signal(signal.SIGTERM)
                proc.communicate(timeout=30)
                hanging.exception(timeout=30)  # the connection ends one way or another
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
    wait_for(lambda: _pids_running(*SLEEP) == [])


def test_sigkill_of_the_server_leaves_no_sandboxed_process(tmp_path: Path, outside: Path) -> None:
    model = ScriptedModel([call_tool("Bash", {"command": "setsid sleep 348.213 & wait"}), "x"])
    with LoopbackOpenAIServer(model) as provider:
        proc, url, token = _start_serve(tmp_path, provider.base_url, outside / "user")
        try:
            with ThreadPoolExecutor(1) as pool:
                pool.submit(
                    httpx.post,
                    f"{url}/v1/conversations/k/messages",
                    json={"content": "sleep"},
                    headers={"Authorization": f"Bearer {token}"},
                    timeout=60,
                )
                wait_for(lambda: len(_pids_running("sleep", "348.213")) == 1)
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
    wait_for(lambda: _pids_running("sleep", "348.213") == [])
