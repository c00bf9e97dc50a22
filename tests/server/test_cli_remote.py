"""``retinue serve`` / ``sessions`` / ``interrupt`` as a user runs them: real processes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from serverkit import Serve, wait_for

from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.testing import ScriptedModel, call_tool

pytestmark = pytest.mark.timeout(300)  # a hang bound


def env_for(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RETINUE_"))}
    env["RETINUE_HOME"] = str(tmp_path / "home")
    env["RETINUE_BLOCK_REAL_MODELS"] = "1"
    return env


def retinue(args: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "retinue", *args],
        env=env_for(tmp_path) | env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,  # a hang bound: a loaded machine starts `retinue` slowly
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_no_server_is_one_line_and_exit_1(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    for args in (["sessions", "--url", url], ["interrupt", "conv-a/researcher", "--url", url]):
        proc = retinue(args, tmp_path)
        assert proc.returncode == 1
        assert proc.stdout == ""
        assert proc.stderr.strip() == (
            f"error: no retinue server at {url}; start one with `retinue serve`"
        )


def test_sessions_and_interrupt_against_a_live_server(serve: Serve, tmp_path: Path) -> None:
    main = ScriptedModel(
        [call_tool("SubAgent", {"task": "think", "role": "slowpoke", "interactive": True}), "ok"]
    )
    server = serve(main, ScriptedModel(["never"], name="scripted:slow", delay=60))
    url = ["--url", server.url]
    with ThreadPoolExecutor(1) as pool:
        turn = pool.submit(
            httpx.post,
            f"{server.url}/v1/conversations/c/messages",
            json={"content": "go", "keep_sessions": True},
            headers={"Authorization": f"Bearer {server.token}"},
            timeout=60,
        )
        with server.client() as client:
            wait_for(lambda: bool(client.get("/v1/sessions").json()["sessions"]))
        listed = retinue(["sessions", *url], tmp_path)
        assert listed.returncode == 0, listed.stderr
        assert "conv-c/slowpoke" in listed.stdout
        assert "slowpoke" in listed.stdout and "running" in listed.stdout
        narrow = retinue(["sessions", *url], tmp_path, COLUMNS="40")  # ids are never cut
        assert "conv-c/slowpoke" in narrow.stdout, narrow.stdout

        stopped = retinue(["interrupt", "conv-c/slowpoke", *url], tmp_path)
        assert stopped.returncode == 0, stopped.stderr
        assert "interrupted the running turn of conv-c/slowpoke" in stopped.stdout
        assert turn.result(timeout=30).json()["content"] == "ok"

    after = retinue(["sessions", "--json", *url], tmp_path)
    assert '"state": "idle"' in after.stdout and '"id": "conv-c/slowpoke"' in after.stdout
    idle = retinue(["interrupt", "conv-c/slowpoke", *url], tmp_path)
    assert idle.returncode == 0 and "no running turn" in idle.stdout
    unknown = retinue(["interrupt", "conv-c/nobody", *url], tmp_path)
    assert unknown.returncode == 1
    assert unknown.stderr.count("\n") == 1 and "404" in unknown.stderr
    assert "no live session 'conv-c/nobody'" in unknown.stderr


def test_serve_answers_a_conversation_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    model = ScriptedModel(["Hello over HTTP."])
    with LoopbackOpenAIServer(model) as provider:
        env = env_for(tmp_path) | {
            "OPENAI_BASE_URL": provider.base_url,
            "OPENAI_API_KEY": "test-key",
        }
        proc = subprocess.Popen(
            [sys.executable, "-m", "retinue", "serve", "--port", "0", "-m", "openai:test", "-q"],
            env=env,
            cwd=tmp_path,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stderr is not None
            banner = proc.stderr.readline()
            assert banner.startswith("retinue serving openai:test on http://127.0.0.1:")
            url = banner.split()[-1]
            assert "Authorization: Bearer $(cat " in proc.stderr.readline()
            assert proc.stderr.readline().startswith(f"web page: {url}/ ")
            token_file = tmp_path / "home" / "server-token"
            assert token_file.stat().st_mode & 0o777 == 0o600
            auth = {"Authorization": f"Bearer {token_file.read_text().strip()}"}
            body = {"content": "hi"}
            refused = httpx.post(f"{url}/v1/conversations/a/messages", json=body, timeout=60)
            assert refused.status_code == 401
            reply = httpx.post(
                f"{url}/v1/conversations/a/messages", json=body, headers=auth, timeout=60
            )
            assert reply.json()["content"] == "Hello over HTTP."
            assert httpx.get(f"{url}/healthz", timeout=60).json()["model"] == "openai:test"
        finally:
            proc.send_signal(signal.SIGINT)
            rest = proc.communicate(timeout=60)[1]
    assert proc.returncode in (0, 130)
    assert "Traceback" not in rest


def test_serve_on_a_busy_port_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = retinue(
            ["serve", "--port", str(port), "-m", "openai:test"], tmp_path, OPENAI_API_KEY="k"
        )
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        f"error: cannot listen on 127.0.0.1:{port}: Address already in use"
    )
