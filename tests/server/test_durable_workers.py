"""Durable sessions on two ``retinue serve`` workers sharing PostgreSQL (real processes, the
model scripted behind a loopback OpenAI server): a session kept on worker A goes on on worker
B with its whole history (no 409); a worker SIGKILLed between two tool calls has its turn
finished by the other worker, no step done twice; an approval pending when its worker stops
is answered on the other one, and the turn goes on there."""

from __future__ import annotations

import contextlib
import json
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_workers import Worker

from memory.backends import start_pg_server
from retinue.llm.base import ToolSpec
from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.messages import Message
from retinue.testing import ScriptedModel, call_tool

pytestmark = pytest.mark.timeout(150)

HELPER_ROLE = """---
name: helper
description: Helps with whatever it is told.
tools: [Read]
---
You help.
"""
DURABLE = {"RETINUE_DURABLE_SESSIONS": "1"}


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    server, url = start_pg_server()
    try:
        yield url
    finally:
        server.stop()


class Script:
    """The model of every agent on both workers, told apart by their system prompts."""

    def __init__(self) -> None:
        self.hanging = threading.Event()
        self.release = threading.Event()
        self.hangs = 1  # the first "after the write" model call hangs (its worker is killed)

    def __call__(self, messages: Sequence[Message], _tools: Sequence[ToolSpec]) -> Any:
        last, users = messages[-1], [m.content for m in messages if m.role == "user"]
        if messages[0].content.startswith("You help."):
            return "helper heard: " + " | ".join(u.rsplit("\n", 1)[-1] for u in users)
        if last.role == "user" and last.content.startswith("delegate "):
            task = last.content.removeprefix("delegate ")
            return call_tool("SubAgent", {"role": "helper", "interactive": True, "task": task})
        if last.role == "user" and last.content.startswith("write "):
            name = last.content.split()[1]
            return call_tool("Write", {"file_path": name, "content": "once\n"})
        if last.role == "tool" and last.name == "Write":
            if self.hangs and "killed" in users[-1]:
                self.hangs -= 1
                self.hanging.set()
                self.release.wait(30)
            return "finished after the write"
        if last.role == "tool":
            return f"main got: {last.content}"
        return f"heard {last.content}"


def history(worker: Worker, cid: str) -> list[dict[str, Any]]:
    return worker.client.get(f"/v1/conversations/{cid}").json().get("messages", [])


def until(condition: Any, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def workers(tmp_path: Path, provider: LoopbackOpenAIServer, url: str, *args: str) -> list[Worker]:
    started = []
    for name in ("a", "b"):
        agents = tmp_path / name / ".retinue" / "agents"
        agents.mkdir(parents=True)
        (agents / "helper.md").write_text(HELPER_ROLE)
        started.append(Worker(tmp_path / name, provider, url, *args, env=DURABLE))
    return started


def test_a_kept_session_goes_on_on_the_other_worker_with_its_history(
    pg_url: str, tmp_path: Path
) -> None:
    with LoopbackOpenAIServer(ScriptedModel(responder=Script()), record=False) as provider:
        a, b = workers(tmp_path, provider, pg_url)
        try:
            url = "/v1/conversations/kept/messages"
            first = a.client.post(url, json={"content": "delegate one", "keep_sessions": True})
            assert first.status_code == 200 and first.json()["content"].startswith(
                "main got: helper heard: one\n"
            )
            second = b.client.post(url, json={"content": "delegate two", "keep_sessions": True})
            assert second.status_code == 200, second.text  # no 409: any worker serves it
            assert second.json()["content"].startswith("main got: helper heard: one | two\n")
            shown = b.client.get("/v1/sessions").json()
            assert [r["id"] for r in shown["recorded"]] == ["conv-kept/helper"]
            assert a.client.get("/v1/sessions/conv-kept/helper").json()["turns"] == 2
            ended = b.client.delete("/v1/conversations/kept").json()
            assert ended["deleted"] == "kept"
            assert b.client.get("/v1/sessions").json()["recorded"] == []
        finally:
            a.stop()
            b.stop()


def test_a_worker_killed_between_two_tool_calls_has_its_turn_finished_by_the_other(
    pg_url: str, tmp_path: Path
) -> None:
    script = Script()
    with LoopbackOpenAIServer(ScriptedModel(responder=script), record=False) as provider:
        a, b = workers(tmp_path, provider, pg_url, "--permission-mode", "bypassPermissions")
        try:

            def work() -> None:
                with contextlib.suppress(httpx.HTTPError):  # its worker dies: no answer
                    a.say("job", "write out.txt (killed)")

            turn = threading.Thread(target=work, daemon=True)
            turn.start()
            assert script.hanging.wait(30)  # Write done and recorded; the next model call hangs
            a.proc.send_signal(signal.SIGKILL)
            a.proc.wait(10)
            script.release.set()

            def finished() -> bool:
                shown = history(b, "job")
                return bool(shown) and shown[-1]["content"] == "finished after the write"

            until(finished)  # b takes the turn up (lease 1 s) with no message sent to it
            shown = [m for m in history(b, "job") if m["role"] != "system"]
            writes = [m for m in shown if m["role"] == "tool" and m.get("name") == "Write"]
            assert len(writes) == 1 and "Error" not in writes[0]["content"]
            assert [m["role"] for m in shown] == ["user", "assistant", "tool", "assistant"]
            assert (tmp_path / "a" / "out.txt").read_text() == "once\n"
            assert not (tmp_path / "b" / "out.txt").exists()  # not done again on b
            turn.join(10)
        finally:
            script.release.set()
            a.stop()
            b.stop()


def test_an_approval_pending_when_its_worker_stops_is_answered_on_the_other(
    pg_url: str, tmp_path: Path
) -> None:
    with LoopbackOpenAIServer(ScriptedModel(responder=Script()), record=False) as provider:
        a, b = workers(tmp_path, provider, pg_url)
        try:

            def work() -> None:
                with contextlib.suppress(httpx.HTTPError):  # its worker stops: no answer
                    a.say("appr", "write note.txt")

            turn = threading.Thread(target=work, daemon=True)
            turn.start()
            pending: list[dict[str, Any]] = []

            def asked() -> bool:
                pending[:] = a.client.get("/v1/conversations/appr/approvals").json()["approvals"]
                return bool(pending)

            until(asked)
            a.stop()  # the service stops while the call waits for a yes
            turn.join(10)
            (request,) = b.client.get("/v1/conversations/appr/approvals").json()["approvals"]
            assert request["tool"] == "Write" and json.loads(request["arguments"])
            answered = b.client.post(
                f"/v1/conversations/appr/approvals/{request['id']}", json={"allow": True}
            )
            assert answered.status_code == 200

            def finished() -> bool:
                shown = history(b, "appr")
                return bool(shown) and shown[-1]["content"] == "finished after the write"

            until(finished)
            assert (tmp_path / "b" / "note.txt").read_text() == "once\n"  # ran once, on b
            assert not (tmp_path / "a" / "note.txt").exists()
        finally:
            a.stop()
            b.stop()
