"""Questions over the HTTP service: the main agent asks the user (its conversation's next
message is the answer), and a person answers a sub-agent's question."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import httpx
import pytest
from serverkit import WAIT_S, HeldModel, Serve
from test_app import sse_events

from retinue.llm.base import ToolSpec
from retinue.messages import AssistantMessage, Message, ToolResultMessage
from retinue.testing import ScriptedModel, call_tool

pytestmark = pytest.mark.timeout(60)


def ask(question: str) -> AssistantMessage:
    return call_tool("AskParent", {"question": question})


def going_with(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
    result = next(m for m in reversed(messages) if isinstance(m, ToolResultMessage))
    return f"going with {result.content}"


def wait_for_state(client: httpx.Client, sid: str, state: str) -> dict[str, Any]:
    info: dict[str, Any] = {}
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        info = client.get(f"/v1/sessions/{sid}").json()
        if info["state"] == state:
            return info
        time.sleep(0.02)
    raise AssertionError(f"{sid} never became {state}: {info}")


def test_the_main_agent_asks_and_the_next_message_answers(serve: Serve) -> None:
    model = ScriptedModel([ask("which port?"), going_with])
    server = serve(model)
    with server.client() as client:
        url = "/v1/conversations/c1/messages"
        body = {"content": "set it up"}
        with client.stream("POST", url, json=body, params={"stream": True}) as response:
            events = sse_events(response.read().decode())
        asking = [d for kind, d in events if kind == "session" and d["action"] == "asking"]
        assert asking and asking[0]["question"] == "which port?"
        kind, result = events[-1]
        assert kind == "result" and result["stop_reason"] == "asking"
        assert result["content"] == "which port?"
        (listed,) = client.get("/v1/conversations").json()["conversations"]
        assert listed["question"] == "which port?" and not listed["running"]
        answer = client.post(url, json={"content": "8080"}).json()
        assert answer == {**answer, "stop_reason": "final", "content": "going with 8080"}
        (listed,) = client.get("/v1/conversations").json()["conversations"]
        assert listed["question"] is None
    assert [m.role for m in model.calls[-1].messages] == [
        "system",
        "user",
        "assistant",
        "tool",
    ]


def test_a_person_answers_a_sub_agents_question(serve: Serve) -> None:
    slow = ScriptedModel([ask("may I?"), "did it"])
    main = ScriptedModel(
        [
            call_tool("SubAgent", {"role": "slowpoke", "interactive": True, "task": "do it"}),
            "it asks something",
        ]
    )
    server = serve(main, slow)
    sid = "conv-c1/slowpoke"
    with server.client() as client:
        body = {"content": "go", "keep_sessions": True}
        assert client.post("/v1/conversations/c1/messages", json=body).status_code == 200
        info = client.get(f"/v1/sessions/{sid}").json()
        assert (info["state"], info["question"]) == ("asking", "may I?")
        assert client.post(f"/v1/sessions/{sid}/answer", json={"content": "yes"}).json() == {
            "id": sid,
            "answered": True,
        }
        info = wait_for_state(client, sid, "idle")
        assert info["unread"] == 1 and info["turns"] == 1
        again = client.post(f"/v1/sessions/{sid}/answer", json={"content": "again"})
        assert again.status_code == 409 and "not asking" in again.json()["error"]


def test_a_person_steers_a_working_sub_agent(serve: Serve, tmp_path) -> None:
    (tmp_path / "a.txt").write_text("alpha")
    slow = HeldModel([call_tool("Read", {"file_path": "a.txt"}), "read it"])  # until steered
    background = {"role": "slowpoke", "interactive": True, "background": True}
    main = ScriptedModel([call_tool("SubAgent", {"task": "read", **background}), "started"])
    server = serve(main, slow)
    sid = "conv-c1/slowpoke"
    with server.client() as client:
        body = {"content": "go", "keep_sessions": True}
        assert client.post("/v1/conversations/c1/messages", json=body).status_code == 200
        wait_for_state(client, sid, "running")
        steered = client.post(f"/v1/sessions/{sid}/steer", json={"content": "only a.txt"})
        assert steered.json() == {"id": sid, "steered": True}
        slow.release.set()
        info = wait_for_state(client, sid, "idle")
        assert info["steered"] == 1 and info["turns"] == 1
        idle = client.post(f"/v1/sessions/{sid}/steer", json={"content": "more"})
        assert idle.status_code == 409 and "no running turn" in idle.json()["error"]
    request = slow.calls[-1].messages
    assert request[-1].role == "user" and "only a.txt" in request[-1].content
