"""The service's front door against a real server on 127.0.0.1: token, Host, Origin, CORS,
body size, turns in flight, idle eviction, and the token file itself."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from serverkit import WAIT_S, HeldModel, Serve, ServerThread, wait_for

from retinue.config import Settings
from retinue.runtime import Runtime
from retinue.server.conversations import Limits
from retinue.server.security import (
    DEFAULT_MAX_BODY,
    TOKEN_FILE,
    Security,
    ensure_token,
    host_name,
    is_loopback,
)
from retinue.testing import ScriptedModel

pytestmark = pytest.mark.timeout(60)

PROTECTED = [
    ("GET", "/v1/conversations"),
    ("POST", "/v1/conversations/a/messages"),
    ("DELETE", "/v1/conversations/a"),
    ("GET", "/v1/sessions"),
    ("GET", "/v1/sessions/conv-a/x"),
    ("POST", "/v1/sessions/conv-a/x/interrupt"),
    ("GET", "/openapi.json"),
    ("GET", "/no/such/path"),
]


def test_every_endpoint_but_healthz_needs_the_token(serve: Serve) -> None:
    server = serve(ScriptedModel())
    with server.client(token=False) as anonymous:
        assert anonymous.get("/healthz").status_code == 200
        for method, path in PROTECTED:
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "x"}):
                answer = anonymous.request(method, path, headers=headers, json={"content": "id"})
                assert answer.status_code == 401, (method, path, headers)
                assert answer.headers["www-authenticate"] == "Bearer"
                assert "bearer token" in answer.json()["error"]
    with server.client() as client:
        assert client.get("/v1/conversations").json() == {"conversations": []}


def test_a_foreign_host_or_origin_is_refused_even_with_the_token(serve: Serve) -> None:
    server = serve(ScriptedModel())
    port = server.url.rsplit(":", 1)[1]
    with server.client() as client:
        for host in ("attacker.example", f"attacker.example:{port}", "127.0.0.1.nip.io"):
            answer = client.get("/v1/conversations", headers={"Host": host})
            assert answer.status_code == 421, host
            assert "not allowed" in answer.json()["error"]
        rebinding = client.post(
            "/v1/conversations/x/messages",
            json={"content": "run id"},
            headers={"Host": "attacker.example", "Origin": "http://attacker.example"},
        )
        assert rebinding.status_code == 421
        for origin in ("http://attacker.example", "null", f"http://evil.test:{port}"):
            answer = client.get("/v1/conversations", headers={"Origin": origin})
            assert answer.status_code == 403, origin
        for host in (f"localhost:{port}", f"[::1]:{port}"):
            assert client.get("/healthz", headers={"Host": host}).status_code == 200
        same = client.get("/v1/conversations", headers={"Origin": f"http://localhost:{port}"})
        assert same.status_code == 200
        assert "access-control-allow-origin" not in same.headers  # CORS is off


def test_cors_only_for_configured_origins(tmp_path: Path) -> None:
    settings = Settings.load(home=tmp_path / "home", workspace=tmp_path)
    runtime = Runtime.create(settings, model=ScriptedModel(), with_memory=False)
    server = ServerThread(runtime, cors=("https://app.example",)).start()
    try:
        with server.client() as client:
            preflight = client.options(
                "/v1/conversations",
                headers={
                    "Origin": "https://app.example",
                    "Access-Control-Request-Method": "GET",
                },
            )
            assert preflight.status_code == 204
            assert preflight.headers["access-control-allow-origin"] == "https://app.example"
            real = client.get("/v1/conversations", headers={"Origin": "https://app.example"})
            assert real.headers["access-control-allow-origin"] == "https://app.example"
            other = client.get("/v1/conversations", headers={"Origin": "https://b.example"})
            assert other.status_code == 403
    finally:
        server.stop()


def _raw_request(url: str, head: str, body: bytes = b"") -> int:
    """Send ``head`` and ``body`` on a raw socket; the status code of the answer.

    The socket's timeout only bounds a hang: a server that waited for the rest of a body
    that never comes would not answer at all, and the read would fail."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        sock.sendall(head.encode() + body)
        first = sock.recv(200).decode(errors="replace")
        return int(first.split()[1])


def test_a_huge_body_is_refused_before_it_is_read(serve: Serve) -> None:
    server = serve(ScriptedModel())
    head = (
        "POST /v1/conversations/a/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {server.token}\r\nContent-Type: application/json\r\n"
        "Content-Length: 300000000\r\n\r\n"
    )
    # answered at all: without waiting for the 300 MB that never come
    assert _raw_request(server.url, head, b'{"content": "') == 413
    chunked = head.replace("Content-Length: 300000000", "Transfer-Encoding: chunked")
    chunked = chunked.replace("/messages", "/approvals/x")  # (messages may carry images)
    size = DEFAULT_MAX_BODY + 10
    chunk = f"{size:x}\r\n".encode() + b"a" * size + b"\r\n0\r\n\r\n"
    assert _raw_request(server.url, chunked, chunk) == 413
    with server.client() as client:  # a normal body still goes through
        assert client.get("/v1/conversations").status_code == 200


def test_turns_beyond_the_limit_are_refused_at_once(serve: Serve) -> None:
    model = HeldModel(["slow reply"])  # the first turn runs until the second is refused
    server = serve(model, limits=Limits(max_turns=1))
    with server.client() as client, ThreadPoolExecutor(1) as pool:
        first = pool.submit(client.post, "/v1/conversations/a/messages", json={"content": "1"})
        wait_for(model.waiting.is_set)
        second = client.post("/v1/conversations/b/messages", json={"content": "2"})
        model.release.set()
        assert second.status_code == 429
        assert "retry later" in second.json()["error"]
        assert first.result(timeout=WAIT_S).json()["content"] == "slow reply"


def test_idle_conversations_are_evicted(serve: Serve) -> None:
    model = ScriptedModel(["one", "two"])
    server = serve(model, limits=Limits(idle_s=1.0))
    with server.client() as client:
        assert client.post("/v1/conversations/a/messages", json={"content": "1"}).is_success
        # (not listed here: on a loaded machine it may already be evicted)
        wait_for(lambda: client.get("/v1/conversations").json()["conversations"] == [])
        again = client.post("/v1/conversations/a/messages", json={"content": "2"})
        assert again.json()["content"] == "two"
        [fresh] = client.get("/v1/conversations").json()["conversations"]
        assert fresh["id"] == "a"
        said = [m.content for m in model.calls[1].messages]
        assert "2" in said and "1" not in said and "one" not in said  # a new history


@pytest.fixture
def no_token_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("RETINUE_TOKEN", raising=False)
    yield


def test_the_token_file_is_created_once_and_kept_private(
    tmp_path: Path, no_token_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    token, created = ensure_token(tmp_path / "home")
    path = tmp_path / "home" / TOKEN_FILE
    assert created and len(token) >= 40
    assert path.stat().st_mode & 0o777 == 0o600
    assert ensure_token(tmp_path / "home") == (token, False)
    path.chmod(0o644)
    assert ensure_token(tmp_path / "home") == (token, False)
    assert path.stat().st_mode & 0o777 == 0o600
    monkeypatch.setenv("RETINUE_TOKEN", "from-the-environment")
    assert ensure_token(tmp_path / "home") == ("from-the-environment", False)


def test_host_names_and_loopback() -> None:
    assert host_name("LocalHost:8765") == "localhost"
    assert host_name("[::1]:80") == "::1"
    assert host_name("::1") == "::1"
    assert is_loopback("127.0.0.2") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.0.0.1")
    assert not is_loopback("example.com")
    sec = Security.build("t", listen_host="10.1.2.3", allow_hosts=["api.example:443"])
    assert sec.host_allowed("10.1.2.3:8765") and sec.host_allowed("api.example")
    assert not Security.build("t", listen_host="0.0.0.0").host_allowed("0.0.0.0")
    assert sec.authorized("Bearer t") and sec.authorized("bearer t")
    assert not sec.authorized("Bearer tt") and not sec.authorized(None)


def test_a_token_refused_by_the_server_is_one_line_for_the_client(
    serve: Serve, tmp_path: Path
) -> None:
    from test_cli_remote import retinue

    server = serve(ScriptedModel())
    proc = retinue(["sessions", "--url", server.url, "--token", "wrong"], tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and "refused the token" in proc.stderr
    fine = retinue(["sessions", "--url", server.url], tmp_path)  # the data dir's token
    assert fine.returncode == 0, fine.stderr
    assert "no live sessions" in fine.stdout


def test_a_public_host_needs_a_configured_token(tmp_path: Path) -> None:
    from test_cli_remote import retinue

    args = ["serve", "--host", "0.0.0.0", "--port", "0", "-m", "openai:test"]
    proc = retinue(args, tmp_path, OPENAI_API_KEY="k")
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1
    assert "refusing to listen on 0.0.0.0 without a token" in proc.stderr
    assert not (tmp_path / "home" / TOKEN_FILE).exists()
