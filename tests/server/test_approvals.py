"""Approvals over HTTP: a call three levels down waits, is listed on its conversation, and is
answered by the conversation's owner (another tenant sees nothing of it)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import httpx
from serverkit import ServerThread, wait_for

from retinue.config import Settings
from retinue.runtime import Runtime
from retinue.testing import ScriptedModel, call_tool

ROLE = """---
name: {name}
description: Level {name} of a chain.
model: scripted:{name}
capabilities: [spawn_agent]
---
You are {name}.
"""


def chain_runtime(tmp_path: Path, models: dict[str, ScriptedModel]) -> Runtime:
    agents = tmp_path / ".retinue" / "agents"
    agents.mkdir(parents=True)
    for name in ("a", "b", "c"):
        (agents / f"{name}.md").write_text(ROLE.format(name=name))
    settings = Settings.load(home=tmp_path / "home", workspace=tmp_path)
    return Runtime.create(
        settings,
        model=models["main"],
        model_for=lambda spec: models[spec.removeprefix("scripted:")],
        with_memory=False,
        permission_mode="default",
    )


def scripted(answer: str) -> dict[str, ScriptedModel]:
    models = {n: ScriptedModel(name=f"scripted:{n}") for n in ("main", "a", "b", "c")}
    models["main"].add(call_tool("SubAgent", {"task": "go", "role": "a"}), "main done")
    models["a"].add(call_tool("SubAgent", {"task": "go", "role": "b"}), "a done")
    models["b"].add(call_tool("SubAgent", {"task": "go", "role": "c"}), "b done")
    models["c"].add(
        call_tool("Write", {"file_path": "deep.txt", "content": "from c"}), f"c: {answer}"
    )
    return models


def post_in_thread(client: httpx.Client, cid: str) -> tuple[threading.Thread, dict[str, Any]]:
    got: dict[str, Any] = {}

    def send() -> None:
        got["response"] = client.post(f"/v1/conversations/{cid}/messages", json={"content": "go"})

    thread = threading.Thread(target=send)
    thread.start()
    return thread, got


def pending(client: httpx.Client, cid: str) -> list[dict[str, Any]]:
    return client.get(f"/v1/conversations/{cid}/approvals").json()["approvals"]


def test_an_approval_three_levels_down_is_answered_over_http(tmp_path: Path) -> None:
    models = scripted("written")
    server = ServerThread(chain_runtime(tmp_path, models)).start()
    try:
        with server.client() as owner, server.client(token=server.issue("bob", "bob")) as bob:
            thread, got = post_in_thread(owner, "c1")
            wait_for(lambda: bool(pending(owner, "c1")))
            [request] = pending(owner, "c1")
            assert (request["tool"], request["depth"], request["role"]) == ("Write", 3, "c")
            assert "deep.txt" in request["arguments"]
            assert owner.get("/v1/conversations/c1").json()["approvals"] == [request]
            # another tenant neither sees nor answers it
            assert bob.get("/v1/conversations/c1/approvals").json()["approvals"] == []
            refused = bob.post(
                f"/v1/conversations/c1/approvals/{request['id']}", json={"allow": True}
            )
            assert refused.status_code == 404
            assert not (tmp_path / "deep.txt").exists()
            answered = owner.post(
                f"/v1/conversations/c1/approvals/{request['id']}", json={"allow": True}
            )
            assert answered.status_code == 200, answered.text
            thread.join(timeout=20)
            assert got["response"].status_code == 200
            assert got["response"].json()["content"] == "main done"
            assert (tmp_path / "deep.txt").read_text() == "from c"
            assert pending(owner, "c1") == []
            again = owner.post(
                f"/v1/conversations/c1/approvals/{request['id']}", json={"allow": True}
            )
            assert again.status_code == 404
    finally:
        server.stop()


def test_a_denial_over_http_is_a_result_the_sub_agent_reads(tmp_path: Path) -> None:
    models = scripted("refused")
    server = ServerThread(chain_runtime(tmp_path, models)).start()
    try:
        with server.client() as owner:
            thread, got = post_in_thread(owner, "c2")
            wait_for(lambda: bool(pending(owner, "c2")))
            [request] = pending(owner, "c2")
            owner.post(
                f"/v1/conversations/c2/approvals/{request['id']}",
                json={"allow": False, "message": "not that file"},
            )
            thread.join(timeout=20)
            assert got["response"].json()["content"] == "main done"
        assert not (tmp_path / "deep.txt").exists()
        last = models["c"].calls[-1].messages[-1]
        assert "did not approve this call: not that file" in str(last.content)
    finally:
        server.stop()


def test_a_bad_answer_is_a_clear_error(tmp_path: Path) -> None:
    server = ServerThread(chain_runtime(tmp_path, scripted("x"))).start()
    try:
        with server.client() as owner:
            r = owner.post("/v1/conversations/c3/approvals/approval-1", json={"allow": "maybe"})
            assert r.status_code == 422
            r = owner.post("/v1/conversations/c3/approvals/approval-1", json={"allow": True})
            assert r.status_code == 404 and "no pending approval" in r.json()["error"]
    finally:
        server.stop()
