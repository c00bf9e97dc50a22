"""Approvals over HTTP: a call three levels down waits, is listed on its conversation, and is
answered by the conversation's owner (another tenant sees nothing of it). A main-agent call
waiting when the service stops is listed again after the restart, and answering it goes on
with the turn; a sub-agent's is gone (its turn was interrupted)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import httpx
from serverkit import WAIT_S, ServerThread, wait_for

from retinue.config import Settings
from retinue.engine.session import INTERRUPTED_NOTE
from retinue.runtime import Runtime
from retinue.saved import LOST_RESULT
from retinue.testing import ScriptedModel, call_tool, call_tools

ROLE = """---
name: {name}
description: Level {name} of a chain.
model: scripted:{name}
capabilities: [spawn_agent]
---
You are {name}.
"""


def chain_runtime(
    tmp_path: Path, models: dict[str, ScriptedModel], *, with_memory: bool = False
) -> Runtime:
    agents = tmp_path / ".retinue" / "agents"
    agents.mkdir(parents=True, exist_ok=True)
    for name in ("a", "b", "c"):
        (agents / f"{name}.md").write_text(ROLE.format(name=name))
    settings = Settings.load(home=tmp_path / "home", workspace=tmp_path)
    return Runtime.create(
        settings,
        model=models["main"],
        model_for=lambda spec: models[spec.removeprefix("scripted:")],
        with_memory=with_memory,
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
        try:
            got["response"] = client.post(
                f"/v1/conversations/{cid}/messages", json={"content": "go"}
            )
        except httpx.TransportError as exc:  # the service stopped meanwhile
            got["error"] = exc

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
            thread.join(timeout=WAIT_S)
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
            thread.join(timeout=WAIT_S)
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


# -- an approval pending when the service stops ------------------------------------------


def stopped_while_pending(
    tmp_path: Path, models: dict[str, ScriptedModel], cid: str
) -> list[dict[str, Any]]:
    """Serve ``models`` (a store in the data directory), send one message, and stop the
    service while a call of it waits for approval (as ``retinue serve`` stops: in-flight
    requests are cancelled after a grace period); what was pending then."""
    server = ServerThread(chain_runtime(tmp_path, models, with_memory=True))
    server.server.config.timeout_graceful_shutdown = 1  # retinue serve's is 5 s
    server.start()
    try:
        with server.client() as owner:
            thread, _got = post_in_thread(owner, cid)
            wait_for(lambda: bool(pending(owner, cid)))
            waiting = pending(owner, cid)
    finally:
        server.stop()
    thread.join(timeout=WAIT_S)
    assert not thread.is_alive()
    return waiting


def main_says(*steps: Any) -> dict[str, ScriptedModel]:
    models = {n: ScriptedModel(name=f"scripted:{n}") for n in ("main", "a", "b", "c")}
    models["main"].add(*steps)
    return models


def main_writes() -> dict[str, ScriptedModel]:
    return main_says(call_tool("Write", {"file_path": "main.txt", "content": "kept"}))


def restarted(tmp_path: Path, models: dict[str, ScriptedModel]) -> ServerThread:
    return ServerThread(chain_runtime(tmp_path, models, with_memory=True)).start()


def test_a_main_agent_approval_survives_a_restart_and_the_turn_goes_on(tmp_path: Path) -> None:
    [before] = stopped_while_pending(tmp_path, main_writes(), "r1")
    assert (before["tool"], before["depth"], before["call_id"]) == ("Write", 0, before["call_id"])
    assert not (tmp_path / "main.txt").exists()

    models = main_says("The file is written.")
    server = restarted(tmp_path, models)
    try:
        with server.client() as owner:
            assert pending(owner, "r1") == [before]  # listed again, the same request
            shown = owner.get("/v1/conversations/r1").json()
            assert shown["approvals"] == [before]
            last = shown["messages"][-1]
            assert last["role"] == "assistant"
            assert [c["id"] for c in last["tool_calls"]] == [before["call_id"]]
            answered = owner.post(
                f"/v1/conversations/r1/approvals/{before['id']}", json={"allow": True}
            )
            assert answered.status_code == 200, answered.text

            def finished() -> bool:
                messages = owner.get("/v1/conversations/r1").json()["messages"]
                return messages[-1]["content"] == "The file is written."

            wait_for(finished)
            assert (tmp_path / "main.txt").read_text() == "kept"
            assert pending(owner, "r1") == []
            [call] = models["main"].calls  # the model went on from the call's result
            result = call.messages[-1]
            assert result.role == "tool" and not result.is_error
            assert [m.role for m in call.messages[1:]] == ["user", "assistant", "tool"]
            again = owner.post(
                f"/v1/conversations/r1/approvals/{before['id']}", json={"allow": True}
            )
            assert again.status_code == 404
    finally:
        server.stop()
    # and the finished turn is what the store keeps: no approval comes back
    third = restarted(tmp_path, main_says())
    try:
        with third.client() as owner:
            assert pending(owner, "r1") == []
            messages = owner.get("/v1/conversations/r1").json()["messages"]
            assert messages[-1]["content"] == "The file is written."
    finally:
        third.stop()


def test_a_denial_after_a_restart_is_the_result_the_model_reads(tmp_path: Path) -> None:
    [before] = stopped_while_pending(tmp_path, main_writes(), "r2")
    models = main_says("Understood, I left it.")
    server = restarted(tmp_path, models)
    try:
        with server.client() as owner:
            owner.post(
                f"/v1/conversations/r2/approvals/{before['id']}",
                json={"allow": False, "message": "not now"},
            )

            def finished() -> bool:
                messages = owner.get("/v1/conversations/r2").json()["messages"]
                return messages[-1]["content"] == "Understood, I left it."

            wait_for(finished)
        assert not (tmp_path / "main.txt").exists()
        told = models["main"].calls[0].messages[-1]
        assert told.role == "tool" and "did not approve this call: not now" in told.content
    finally:
        server.stop()


def test_a_new_message_after_a_restart_withdraws_the_stored_approval(tmp_path: Path) -> None:
    models = {n: ScriptedModel(name=f"scripted:{n}") for n in ("main", "a", "b", "c")}
    models["main"].add(  # two calls in one step: Read runs at once, Write waits
        call_tools(
            ("Read", {"file_path": "x.txt"}), ("Write", {"file_path": "w.txt", "content": "w"})
        )
    )
    (tmp_path / "x.txt").write_text("x")
    [before] = stopped_while_pending(tmp_path, models, "r3")
    later = main_says("Something else, then.")
    server = restarted(tmp_path, later)
    try:
        with server.client() as owner:
            assert [a["id"] for a in pending(owner, "r3")] == [before["id"]]
            r = owner.post("/v1/conversations/r3/messages", json={"content": "never mind"})
            assert r.json()["content"] == "Something else, then."
            assert pending(owner, "r3") == []
            refused = owner.post(
                f"/v1/conversations/r3/approvals/{before['id']}", json={"allow": True}
            )
            assert refused.status_code == 404
        seen = [(m.role, m.content) for m in later["main"].calls[0].messages[2:]]
        assert seen[0][0] == "assistant"
        assert ("tool", LOST_RESULT) in seen  # the Read may have run: not run again
        assert ("tool", "Error: cancelled before it finished") in seen  # the Write
        assert seen[-2:] == [("assistant", INTERRUPTED_NOTE), ("user", "never mind")]
        assert not (tmp_path / "w.txt").exists()
    finally:
        server.stop()


def test_a_sub_agent_approval_does_not_survive_a_restart(tmp_path: Path) -> None:
    [before] = stopped_while_pending(tmp_path, scripted("unused"), "r4")
    assert before["depth"] == 3
    server = restarted(tmp_path, scripted("unused"))
    try:
        with server.client() as owner:
            assert pending(owner, "r4") == []
            messages = owner.get("/v1/conversations/r4").json()["messages"]
            assert (messages[-1]["role"], messages[-1]["content"]) == (
                "assistant",
                INTERRUPTED_NOTE,
            )
            r = owner.post(f"/v1/conversations/r4/approvals/{before['id']}", json={"allow": True})
            assert r.status_code == 404
        assert not (tmp_path / "deep.txt").exists()
    finally:
        server.stop()
