"""Named tokens, each a tenant, against a real server on 127.0.0.1 (issue 25, item 8): the
token file, issue and revoke on a live server, and a property over routes x tenants: a
tenant never sees or changes another's conversations, sessions or memory."""

from __future__ import annotations

import asyncio
import json
import re
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from serverkit import Serve, ServerThread

from retinue.errors import ConfigError
from retinue.llm.base import ToolSpec
from retinue.messages import Message
from retinue.server.tokens import TOKENS_FILE, TokenBook
from retinue.testing import ScriptedModel, call_tool

pytestmark = pytest.mark.timeout(300)


def test_tokens_are_kept_hashed_private_and_named(tmp_path: Path) -> None:
    book = TokenBook(tmp_path)
    token = book.issue("alice")
    other = book.issue("bob", tenant="team")
    path = tmp_path / TOKENS_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert token not in path.read_text() and other not in path.read_text()
    assert [(t.name, t.tenant) for t in book.tokens()] == [("alice", "alice"), ("bob", "team")]
    found = book.find(other)
    assert found is not None and (found.name, found.tenant) == ("bob", "team")
    assert book.find(token + "x") is None
    with pytest.raises(ConfigError, match="exists"):
        book.issue("alice")
    for bad in ("", "@x", "a/b", "x" * 65, "../etc"):
        with pytest.raises(ConfigError, match="bad"):
            book.issue(bad)
    book.revoke("alice")
    assert book.find(token) is None and book.find(other) is not None
    with pytest.raises(ConfigError, match="no token named 'alice'"):
        book.revoke("alice")


def test_a_token_issued_or_revoked_takes_effect_on_a_running_server(serve: Serve) -> None:
    server = serve(ScriptedModel())
    token = server.issue("carol")
    with server.client(token=token) as carol:
        assert carol.get("/v1/conversations").status_code == 200
        server.tokens.revoke("carol")
        refused = carol.get("/v1/conversations")
        assert refused.status_code == 401 and "bearer token" in refused.json()["error"]


def test_the_token_cli_issues_lists_and_revokes(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from retinue.cli.app import app

    runner = CliRunner()
    home = ["--home", str(tmp_path)]
    issued = runner.invoke(app, ["token", "issue", "dana", "--tenant", "ops", *home])
    assert issued.exit_code == 0, issued.output
    token = issued.stdout.strip().splitlines()[-1]
    assert TokenBook(tmp_path).find(token) is not None
    listed = runner.invoke(app, ["token", "list", *home])
    assert "dana" in listed.stdout and "tenant ops" in listed.stdout and token not in listed.stdout
    assert runner.invoke(app, ["token", "issue", "a/b", *home]).exit_code == 1
    assert runner.invoke(app, ["token", "revoke", "dana", *home]).exit_code == 0
    gone = runner.invoke(app, ["token", "revoke", "dana", *home])
    assert gone.exit_code == 1 and "no token named 'dana'" in gone.output


# -- isolation: a property over routes x tenants ---------------------------------------------

SECRET = re.compile(r"SECRET-[a-z]+")


def main_model(messages: Sequence[Message], _tools: Sequence[ToolSpec]) -> Any:
    """``remember X`` -> core memory; ``open X`` -> an interactive session; else it says
    which secrets its prompt (its tenant's memory) holds."""
    last = messages[-1]
    if last.role == "tool":
        return f"done: {last.content[:80]}"
    text = last.content
    if text.startswith("remember "):
        return call_tool("core_memory_append", {"block": "human", "content": text[9:]})
    if text.startswith("open "):
        args = {"task": text[5:], "role": "slowpoke", "interactive": True}
        return call_tool("SubAgent", args)
    system = messages[0].content if messages[0].role == "system" else ""
    return "ok; I recall: " + " ".join(SECRET.findall(system))


def role_model(messages: Sequence[Message], _tools: Sequence[ToolSpec]) -> str:
    return f"slowpoke did: {messages[-1].content[:60]}"


TENANTS = ("service", "alice", "bob")  # the service's own token, and two named tokens


def clients(server: ServerThread) -> dict[str, httpx.Client]:
    tokens = {"service": server.token, "alice": server.issue("alice"), "bob": server.issue("bob")}
    return {who: server.client(token=t) for who, t in tokens.items()}


def own(who: str) -> str:
    return f"only-{who}"  # each tenant's conversation; every tenant also has "same"


def setup_tenant(client: httpx.Client, who: str) -> None:
    for cid in (own(who), "same"):
        for text in (f"remember SECRET-{who}", f"open SECRET-{who} task"):
            sent = client.post(
                f"/v1/conversations/{cid}/messages", json={"content": text, "keep_sessions": True}
            )
            assert sent.status_code == 200, sent.text


def snapshot(client: httpx.Client) -> Any:
    """Everything a tenant has, as it sees it."""
    views = client.get("/v1/conversations").json()["conversations"]
    histories = {
        v["id"]: client.get(f"/v1/conversations/{v['id']}").json()["messages"] for v in views
    }
    sessions = client.get("/v1/sessions").json()["sessions"]
    keep = ("id", "parent_id", "state", "turns", "messages", "steered", "last_reply")
    return (
        sorted((v["id"], v["messages"]) for v in views),
        histories,
        sorted(tuple(s[k] for k in keep) for s in sessions),
    )


def targets(victim: str) -> list[str]:
    """Ids that name the victim's things, as its clients see them and as the server keeps
    them inside (another tenant's prefix), raw and escaped."""
    session = f"conv-{own(victim)}/slowpoke"
    return [
        own(victim),
        session,
        f"@{victim}/{session}",
        quote(f"@{victim}/{session}", safe=""),
        f"@{victim}/conv-same/slowpoke",
        "conv-same/slowpoke",
        f"../{session}",
    ]


def request_for(route: str, target: str) -> tuple[str, str, dict[str, Any]]:
    cid = quote(target, safe="")
    sid = quote(target, safe="/@")
    body = {"content": "open probe", "keep_sessions": True}
    return {
        "list": ("GET", "/v1/conversations", {}),
        "get": ("GET", f"/v1/conversations/{cid}", {}),
        "post": ("POST", f"/v1/conversations/{cid}/messages", {"json": body}),
        "stream": ("POST", f"/v1/conversations/{cid}/messages?stream=true", {"json": body}),
        "delete": ("DELETE", f"/v1/conversations/{cid}", {}),
        "sessions": ("GET", "/v1/sessions", {"params": {"parent": target}}),
        "all-sessions": ("GET", "/v1/sessions", {}),
        "session": ("GET", f"/v1/sessions/{sid}", {}),
        "interrupt": ("POST", f"/v1/sessions/{sid}/interrupt", {}),
        "answer": ("POST", f"/v1/sessions/{sid}/answer", {"json": {"content": "yes"}}),
        "steer": ("POST", f"/v1/sessions/{sid}/steer", {"json": {"content": "stop"}}),
        "openai": (
            "POST",
            "/v1/chat/completions",
            {
                "json": {"model": "retinue", "messages": [{"role": "user", "content": "hi"}]},
                "headers": {"X-Retinue-Conversation": target, "X-Retinue-Keep-Sessions": "1"},
            },
        ),
    }[route]


ROUTES = ("list", "get", "post", "stream", "delete", "sessions", "all-sessions", "session",
          "interrupt", "answer", "steer", "openai")  # fmt: skip


@pytest.fixture
def tenants(serve: Serve) -> Any:
    server = serve(ScriptedModel(responder=main_model),
                   ScriptedModel(responder=role_model, name="scripted:slow"),
                   memory=True)  # fmt: skip
    by_name = clients(server)
    for who, client in by_name.items():
        setup_tenant(client, who)
    yield by_name
    for client in by_name.values():
        client.close()


@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    steps=st.lists(
        st.tuples(
            st.permutations(TENANTS).map(lambda p: (p[0], p[1])),  # (attacker, victim)
            st.sampled_from(ROUTES),
            st.integers(0, 6),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_a_tenant_never_sees_or_changes_anothers_things(
    tenants: dict[str, httpx.Client], steps: list[tuple[tuple[str, str], str, int]]
) -> None:
    before = {who: snapshot(c) for who, c in tenants.items()}
    for who in TENANTS:  # what each tenant has, and its memory, are its own
        assert {cid for cid, _ in before[who][0]} >= {own(who), "same"}
        assert json.dumps(before[who]).count("SECRET-") == len(
            re.findall(f"SECRET-{who}", json.dumps(before[who]))
        ), who
    for (attacker, victim), route, pick in steps:
        method, path, kwargs = request_for(route, targets(victim)[pick])
        answer = tenants[attacker].request(method, path, **kwargs)
        assert answer.status_code < 500, (route, answer.text)
        assert f"SECRET-{victim}" not in answer.text, (attacker, victim, route, answer.text)
        after = snapshot(tenants[victim])
        assert after == before[victim], (attacker, victim, route)
        assert f"SECRET-{victim}" not in json.dumps(snapshot(tenants[attacker]))


def test_the_openai_endpoint_of_a_tenant_sees_only_its_own_memory(
    tenants: dict[str, httpx.Client],
) -> None:
    for who, client in tenants.items():
        reply = client.post(
            "/v1/chat/completions",
            json={"model": "retinue", "messages": [{"role": "user", "content": "who am I?"}]},
        ).json()
        content = reply["choices"][0]["message"]["content"]
        assert content.startswith("ok; I recall:") and set(SECRET.findall(content)) == {
            f"SECRET-{who}"
        }


# -- mcp serve --http: each token is a parent of its own, in its tenant -----------------------


async def test_each_mcp_http_token_is_its_own_parent(tmp_path: Path) -> None:
    import threading

    import uvicorn
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    from retinue.config import Settings
    from retinue.mcp.server.serve import build_server
    from retinue.runtime import Runtime
    from retinue.server.security import Guard, Security, ensure_token

    agents = tmp_path / ".retinue" / "agents"
    agents.mkdir(parents=True)
    (agents / "helper.md").write_text("---\nname: helper\ndescription: helps\n---\nYou help.\n")
    home = tmp_path / "home"
    runtime = Runtime.create(
        Settings.load(home=home, workspace=tmp_path),
        model=ScriptedModel(responder=role_model),
        with_memory=False,
    )
    token = ensure_token(home)[0]
    book = TokenBook(home)
    tokens = {"service": token, "alice": book.issue("alice"), "bob": book.issue("bob")}
    app = Guard(build_server(runtime).streamable_http_app(host="127.0.0.1"),
                Security.build(token, tokens=book))  # fmt: skip
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        while not server.started:
            await asyncio.sleep(0.02)
        port = server.servers[0].sockets[0].getsockname()[1]
        url = f"http://127.0.0.1:{port}/mcp"

        async def call(who: str, tool: str, **args: Any) -> str:
            http = create_mcp_http_client(headers={"Authorization": f"Bearer {tokens[who]}"})
            async with Client(streamable_http_client(url, http_client=http)) as client:
                result = await client.call_tool(tool, {"role": "helper", **args})
                return "\n".join(getattr(b, "text", "") for b in result.content)

        await call("alice", "SubAgent", task="SECRET-alice", interactive=True)
        await call("service", "SubAgent", task="SECRET-service", interactive=True)
        held = {s.id: s.parent_id for s in runtime.manager.sessions()}
        assert held == {"mcp-client-alice/helper": "mcp-client-alice",
                        "mcp-client/helper": "mcp-client"}  # fmt: skip
        contexts = {s.id: s.session.config.context.tenant
                    for s in runtime.manager.registry.held_by()}  # fmt: skip
        assert contexts == {"mcp-client-alice/helper": "alice", "mcp-client/helper": "default"}
        status = await call("bob", "SubAgentStatus")
        assert "SECRET" not in status and "mcp-client-alice" not in status
        await call("bob", "UnloadSubAgent")  # bob has no helper: nothing of alice's ends
        assert "mcp-client-alice/helper" in {s.id for s in runtime.manager.sessions()}
        again = await call("alice", "SubAgent", task="second", interactive=True)
        assert "second" in again
        assert "2 turn(s)" in await call("alice", "SubAgentStatus")  # alice's, untouched
    finally:
        server.should_exit = True
        thread.join(timeout=15)


def test_a_named_tenant_sees_its_ids_as_the_service_tenant_sees_its_own(serve: Serve) -> None:
    server = serve(ScriptedModel(responder=main_model),
                   ScriptedModel(responder=role_model, name="scripted:slow"))  # fmt: skip
    with server.client(token=server.issue("alice")) as alice:
        body = {"content": "open the plan", "keep_sessions": True}
        frames = alice.post("/v1/conversations/s/messages?stream=true", json=body).text
        events = [json.loads(line[6:]) for line in frames.splitlines() if line.startswith("data: ")]
        agents = {e.get("agent_id") for e in events} - {None}
        assert agents >= {"conv-s", "conv-s/slowpoke"} and "@" not in frames
        [session] = alice.get("/v1/sessions").json()["sessions"]
        assert (session["id"], session["parent_id"]) == ("conv-s/slowpoke", "conv-s")
        assert alice.get("/v1/sessions", params={"parent": "conv-s"}).json()["sessions"]
        view = alice.get("/v1/sessions/conv-s/slowpoke").json()
        assert view["id"] == "conv-s/slowpoke" and view["turns"] == 1
        assert alice.post("/v1/sessions/conv-s/slowpoke/interrupt").json() == {
            "id": "conv-s/slowpoke", "interrupted": False
        }  # fmt: skip
    with server.client() as service:  # the service's tenant has no such session
        assert service.get("/v1/sessions").json()["sessions"] == []
        assert service.get("/v1/sessions/conv-s/slowpoke").status_code == 404
        assert service.get("/v1/sessions/@alice/conv-s/slowpoke").status_code == 404
