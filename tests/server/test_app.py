"""The HTTP service against a real uvicorn server, the models scripted."""

from __future__ import annotations

import json
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from serverkit import WAIT_S, Serve, ServerThread, wait_for

from retinue.engine.session import INTERRUPTED_NOTE
from retinue.errors import MemoryStoreError, ModelError, RoleError
from retinue.events import Event
from retinue.messages import AssistantMessage, ReasoningPart
from retinue.server.app import error_status
from retinue.server.conversations import ConversationGone, ServerBusy
from retinue.server.hub import EventHub
from retinue.testing import ScriptedModel, call_tool

pytestmark = pytest.mark.timeout(60)

RESEARCH = {"role": "researcher", "interactive": True}
SLOW = {"role": "slowpoke", "interactive": True}


def sse_events(text: str) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        out.append((lines["event"], json.loads(lines["data"])))
    return out


def post_in_background(server: ServerThread, cid: str, **body: Any) -> Future[httpx.Response]:
    pool = ThreadPoolExecutor(1)
    future = pool.submit(
        httpx.post,
        f"{server.url}/v1/conversations/{cid}/messages",
        json=body,
        headers={"Authorization": f"Bearer {server.token}"},
        timeout=30,
    )
    pool.shutdown(wait=False)
    return future


def test_a_message_round_trip_keeps_each_conversation_apart(serve: Serve, tmp_path) -> None:
    (tmp_path / "a.txt").write_text("hello from a")
    model = ScriptedModel(
        [call_tool("Read", {"file_path": "a.txt"}), "It says hello.", "Second answer.", "Other."]
    )
    server = serve(model)
    with server.client() as client:
        first = client.post("/v1/conversations/one/messages", json={"content": "read a.txt"})
        assert first.status_code == 200
        answer = first.json()
        assert answer["content"] == "It says hello."
        assert answer["stop_reason"] == "final"
        assert answer["tools_used"] == ["Read"]
        assert answer["usage"]["requests"] == 2 and answer["usage"]["input_tokens"] > 0
        again = client.post("/v1/conversations/one/messages", json={"content": "and now?"})
        assert again.json()["content"] == "Second answer."
        other = client.post("/v1/conversations/two/messages", json={"content": "hi"})
        assert other.json()["content"] == "Other."
        listed = client.get("/v1/conversations").json()["conversations"]
    assert [c["id"] for c in listed] == ["two", "one"]  # the latest first
    # turn two of "one" saw turn one; conversation "two" started fresh
    assert [m.role for m in model.calls[2].messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert [m.role for m in model.calls[3].messages] == ["system", "user"]
    model.assert_done()


def test_turns_of_one_conversation_run_one_at_a_time(serve: Serve) -> None:
    model = ScriptedModel(["first", "second"], delay=0.3)
    server = serve(model)
    a = post_in_background(server, "c", content="A")
    b = post_in_background(server, "c", content="B")
    answers = {a.result(WAIT_S).json()["content"], b.result(WAIT_S).json()["content"]}
    assert answers == {"first", "second"}
    # the second turn's request holds the first turn's whole exchange
    assert [m.role for m in model.calls[1].messages] == ["system", "user", "assistant", "user"]


def test_sse_streams_tool_and_session_events_then_the_result(serve: Serve) -> None:
    model = ScriptedModel(
        [
            call_tool("SubAgent", {"task": "find the loader", **RESEARCH}),
            "It is in config.py.",  # the researcher's turn
            call_tool("UnloadSubAgent", {"role": "researcher"}),
            "Done: config.py.",
        ]
    )
    server = serve(model)
    with server.client() as client:
        response = client.post(
            "/v1/conversations/s/messages?stream=true", json={"content": "where is it?"}
        )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = sse_events(response.text)
    kinds = [k for k, _ in events]
    assert kinds[-1] == "result"
    assert events[-1][1]["content"] == "Done: config.py."
    assert events[-1][1]["tools_used"] == ["SubAgent", "UnloadSubAgent"]
    tools = [d["name"] for k, d in events if k == "tool_started"]
    assert tools == ["SubAgent", "UnloadSubAgent"]
    sessions = [(d["agent_id"], d["action"]) for k, d in events if k == "session"]
    assert sessions == [
        ("conv-s/researcher", "created"),
        ("conv-s/researcher", "paused"),
        ("conv-s/researcher", "unloaded"),
    ]
    progress = events[:-1]
    assert ("run_started", "conv-s/researcher") in [(k, d["agent_id"]) for k, d in progress]
    assert "text_delta" in kinds  # a streamed turn asks for the main agent's text
    assert all(d["agent_id"].startswith("conv-s") for _, d in progress)


def test_sse_by_accept_header_reports_a_failed_turn_as_an_error_event(serve: Serve) -> None:
    server = serve(ScriptedModel())  # every call unscripted: the model "fails"
    with server.client() as client:
        response = client.post(
            "/v1/conversations/e/messages",
            json={"content": "hi"},
            headers={"Accept": "text/event-stream"},
        )
    kind, data = sse_events(response.text)[-1]
    assert kind == "error"
    assert data["status"] == 502 and "unscripted call" in data["error"]


def test_a_running_session_is_listed_and_interrupting_it_keeps_the_session(
    serve: Serve,
) -> None:
    main = ScriptedModel(
        [call_tool("SubAgent", {"task": "think hard", **SLOW}), "It was interrupted."]
    )
    slow = ScriptedModel(["never said"], name="scripted:slow", delay=60)
    server = serve(main, slow)
    sid = "conv-w/slowpoke"
    turn = post_in_background(server, "w", content="go", keep_sessions=True)
    with server.client() as client:

        def running() -> bool:
            live = client.get("/v1/sessions").json()["sessions"]
            return bool(live) and live[0]["state"] == "running"

        wait_for(running)
        [info] = client.get("/v1/sessions", params={"parent": "conv-w"}).json()["sessions"]
        assert (info["id"], info["role"], info["parent_id"]) == (sid, "slowpoke", "conv-w")
        assert info["turns"] == 0 and info["instance"] is None
        assert client.get("/v1/sessions", params={"parent": "conv-x"}).json()["sessions"] == []

        stopped = client.post(f"/v1/sessions/{sid}/interrupt")
        assert stopped.json() == {"id": sid, "interrupted": True}
        answer = turn.result(timeout=WAIT_S)
        assert answer.status_code == 200 and answer.json()["content"] == "It was interrupted."
        assert "interrupted; the session is kept" in main.calls[1].messages[-1].content

        kept = client.get(f"/v1/sessions/{sid}").json()
        assert kept["state"] == "idle"
        assert [m["role"] for m in kept["history"]] == ["system", "user", "assistant"]
        assert kept["history"][1]["content"] == "think hard"
        assert kept["history"][-1]["content"] == INTERRUPTED_NOTE
        again = client.post(f"/v1/sessions/{sid}/interrupt")
        assert again.json()["interrupted"] is False

        deleted = client.delete("/v1/conversations/w").json()
        assert deleted == {"deleted": "w", "ended_sessions": [sid]}
        assert client.get("/v1/sessions").json()["sessions"] == []


def test_deleting_a_conversation_consolidates_its_sessions(serve: Serve) -> None:
    model = ScriptedModel(
        [
            call_tool("SubAgent", {"task": "where is the loader?", **RESEARCH}),
            "config.py loads it.",
            "Asked the researcher.",
            call_tool(
                "memorize", {"block_updates": [], "new_passages": ["config.py holds the loader"]}
            ),
        ]
    )
    server = serve(model, memory=True)
    with server.client() as client:
        reply = client.post(
            "/v1/conversations/m/messages", json={"content": "ask", "keep_sessions": True}
        )
        assert reply.status_code == 200, reply.text
        [info] = client.get("/v1/sessions").json()["sessions"]
        assert (info["id"], info["state"], info["turns"]) == ("conv-m/researcher", "idle", 1)
        assert info["last_reply"] == "config.py loads it."
        assert info["tokens"] == info["input_tokens"] + info["output_tokens"] > 0
        deleted = client.delete("/v1/conversations/m")
        assert deleted.json()["ended_sessions"] == ["conv-m/researcher"]
        assert client.get("/v1/sessions").json()["sessions"] == []
        gone = client.delete("/v1/conversations/m")
    model.assert_done()  # the consolidation call happened
    consolidation = model.calls[-1].messages
    assert any("config.py loads it." in m.content for m in consolidation)
    assert gone.status_code == 404 and "no conversation 'm'" in gone.json()["error"]


def test_bad_requests_are_one_line_json_errors(serve: Serve) -> None:
    server = serve(ScriptedModel())
    with server.client() as client:
        unknown = client.get("/v1/sessions/conv-a/researcher")
        assert unknown.status_code == 404
        assert unknown.json() == {
            "error": "no live session 'conv-a/researcher' (live sessions: none)"
        }
        assert client.post("/v1/sessions/conv-a/researcher/interrupt").status_code == 404
        missing = client.post("/v1/conversations/a/messages", json={"text": "hi"})
        assert missing.status_code == 422
        assert "content: Field required" in missing.json()["error"]
        empty = client.post("/v1/conversations/a/messages", json={"content": ""})
        assert empty.status_code == 422 and "content" in empty.json()["error"]
        broken = client.post(
            "/v1/conversations/a/messages",
            content=b"{not json",
            headers={"Content-Type": "application/json"},
        )
        assert broken.status_code == 422 and "error" in broken.json()
        bad_id = client.post("/v1/conversations/no%20spaces/messages", json={"content": "x"})
        assert bad_id.status_code == 400 and "bad conversation id" in bad_id.json()["error"]
        long_id = client.get("/v1/conversations/" + "x" * 20_000)  # (quoted in short)
        assert long_id.status_code == 400 and len(long_id.json()["error"]) < 200
        failed = client.post("/v1/conversations/a/messages", json={"content": "hi"})
        assert failed.status_code == 502
        assert set(failed.json()) == {"error"} and "\n" not in failed.json()["error"]
        assert client.get("/healthz").json()["status"] == "ok"


def test_event_hub_routes_by_agent_tree() -> None:
    seen: list[str] = []
    upstream: list[str] = []
    hub = EventHub(lambda e: upstream.append(e.agent_id))
    with hub.subscribe("conv-a", lambda e: seen.append(e.agent_id)):
        for agent in ("conv-a", "conv-a/researcher", "conv-ab", "conv-b/x"):
            hub(Event("run_started", agent))
    hub(Event("run_started", "conv-a"))
    assert seen == ["conv-a", "conv-a/researcher"]
    assert len(upstream) == 5


def test_a_stream_client_that_leaves_cancels_only_its_turn(serve: Serve) -> None:
    main = ScriptedModel([call_tool("SubAgent", {"task": "think", **SLOW})])
    server = serve(main, ScriptedModel(["never"], name="scripted:slow", delay=60))
    with server.client() as client:
        body = {"content": "go"}
        with client.stream("POST", "/v1/conversations/d/messages?stream=true", json=body) as r:
            for line in r.iter_lines():
                if line.startswith("data:") and '"created"' in line:
                    break  # the session is up; now walk away
        wait_for(lambda: client.get("/v1/sessions").json()["sessions"] == [])
        [conv] = client.get("/v1/conversations").json()["conversations"]
        assert conv["id"] == "d" and conv["running"] is False
        main.add("Back again.")
        again = client.post("/v1/conversations/d/messages", json={"content": "still there?"})
    assert again.json()["content"] == "Back again."
    assert INTERRUPTED_NOTE in [m.content for m in main.calls[-1].messages]


def test_deleting_a_conversation_mid_turn_cancels_the_turn(serve: Serve) -> None:
    main = ScriptedModel([call_tool("SubAgent", {"task": "think", **SLOW})])
    server = serve(main, ScriptedModel(["never"], name="scripted:slow", delay=60))
    turn = post_in_background(server, "x", content="go", keep_sessions=True)
    with server.client() as client:
        wait_for(lambda: bool(client.get("/v1/sessions").json()["sessions"]))
        deleted = client.delete("/v1/conversations/x").json()
        assert deleted["ended_sessions"] == ["conv-x/slowpoke"]
        answer = turn.result(timeout=WAIT_S)
        assert answer.status_code == 409
        assert answer.json() == {"error": "conversation 'x' was deleted during this turn"}
        assert client.get("/v1/conversations").json()["conversations"] == []


def test_each_kind_of_turn_error_has_its_status() -> None:
    cases: list[tuple[Exception, int]] = [
        (ConversationGone("gone"), 409),
        (ServerBusy("busy"), 429),
        (ModelError("model down"), 502),
        (MemoryStoreError("database down"), 503),
        (RoleError("no such role"), 400),
        (KeyError("bug"), 500),
    ]
    for exc, status in cases:
        assert error_status(exc)[0] == status, exc


def test_a_conversation_shows_reasoning_as_text_never_its_signed_payload(serve: Serve) -> None:
    """Signed thinking and encrypted reasoning go back only to the model that made them: the
    HTTP view of a conversation shows the kind and the readable text, not the payload."""
    payload = {"type": "thinking", "signature": "SIG-SECRET-abc"}
    part = ReasoningPart("anthropic", "claude-fable-5-2", "thinking", payload, "I should greet.")
    server = serve(ScriptedModel([AssistantMessage("Hello.", reasoning=(part,))]))
    with server.client() as client:
        assert (
            client.post("/v1/conversations/r/messages", json={"content": "hi"}).status_code == 200
        )
        shown = client.get("/v1/conversations/r").json()
    [reply] = [m for m in shown["messages"] if m["role"] == "assistant"]
    assert reply["reasoning"] == [{"provider": "anthropic", "model": "claude-fable-5-2",
                                   "kind": "thinking", "text": "I should greet."}]  # fmt: skip
    assert "SIG-SECRET" not in json.dumps(shown)
