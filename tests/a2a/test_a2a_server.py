"""Retinue's A2A server driven by ``a2a-sdk``'s own client over HTTP on 127.0.0.1: the card's
skills are the roles; one-shot; a two-turn context whose second turn sees the first; a
sub-agent's question is ``input-required``, answered by the next message of the task, and the
same turn goes on; cancel interrupts; unload consolidates; the token is required."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import threading
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from a2a.client import ClientConfig, ClientFactory
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskState,
)

from retinue.a2a.server import build_app
from retinue.config import Settings
from retinue.runtime import Runtime
from retinue.server.security import Guard, Security, ensure_token
from retinue.server.tokens import TokenBook
from retinue.testing import ScriptedModel, call_tool

pytestmark = pytest.mark.timeout(60)

ROLE = """---
name: helper
description: Helps with anything.
model: scripted:helper
memory: true
---
You help.
"""


def memorize(*passages: str) -> Any:
    return call_tool("memorize", {"block_updates": [], "new_passages": list(passages)})


class Served:
    def __init__(self, runtime: Runtime, url: str, token: str, book: TokenBook) -> None:
        self.runtime, self.url, self.token, self.book = runtime, url, token, book

    def http(self, token: str | None = None) -> httpx.AsyncClient:
        return httpx.AsyncClient(headers={"Authorization": f"Bearer {token or self.token}"},
                                 timeout=30)  # fmt: skip

    async def client(self, *, streaming: bool = False, token: str | None = None) -> Any:
        config = ClientConfig(httpx_client=self.http(token), streaming=streaming)
        return await ClientFactory(config).create_from_url(self.url)


@pytest.fixture
def helper_model() -> ScriptedModel:
    return ScriptedModel(name="scripted:helper")


@pytest.fixture
async def served(tmp_path: Path, helper_model: ScriptedModel) -> AsyncIterator[Served]:
    agents = tmp_path / ".retinue" / "agents"
    agents.mkdir(parents=True)
    (agents / "helper.md").write_text(ROLE)
    home = tmp_path / "home"
    runtime = Runtime.create(Settings.load(home=home, workspace=tmp_path),
                             model=ScriptedModel(name="scripted:main"),
                             model_for=lambda _spec: helper_model)  # fmt: skip
    token = ensure_token(home)[0]
    book = TokenBook(home)

    def app_of(url: str) -> Any:
        return Guard(build_app(runtime, url)[0], Security.build(token, tokens=book))

    with socket.socket() as s:  # the card names the server's URL: take a port first
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/"
    config = uvicorn.Config(app_of(url), host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        await asyncio.sleep(0.02)
    try:
        yield Served(runtime, url, token, book)
    finally:
        server.should_exit = True
        await asyncio.to_thread(thread.join, 15)


def message(text: str, *, context_id: str | None = None, task_id: str | None = None,
            **metadata: Any) -> SendMessageRequest:  # fmt: skip
    msg = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)],
                  context_id=context_id or "", task_id=task_id or "")  # fmt: skip
    if metadata:
        msg.metadata.update(metadata)
    return SendMessageRequest(message=msg, metadata={"role": "helper", **metadata})


async def last_task(client: Any, request: SendMessageRequest, updates: list[Any] | None = None
                    ) -> Any:  # fmt: skip
    """Send, read the response or the stream to its end, then get the task as it stands."""
    task_id = None
    async for event in client.send_message(request):
        if event.HasField("task"):
            task_id = event.task.id
        elif event.HasField("status_update"):
            task_id = event.status_update.task_id
            if updates is not None:
                updates.append(event.status_update)
    assert task_id is not None
    return await client.get_task(GetTaskRequest(id=task_id))


def said(task: Any) -> str:
    return "\n".join(p.text for p in task.status.message.parts)


async def test_the_card_lists_the_roles_and_the_token_is_required(served: Served) -> None:
    async with served.http() as http:
        card = (await http.get(served.url + ".well-known/agent-card.json")).json()
    assert [s["id"] for s in card["skills"]] == list(served.runtime.catalog.roles)
    assert "helper" in [s["id"] for s in card["skills"]]
    async with httpx.AsyncClient() as anonymous:
        refused = await anonymous.post(served.url, json={})
    assert refused.status_code == 401


async def test_one_shot_and_a_two_turn_context(served: Served, helper_model: ScriptedModel
                                               ) -> None:  # fmt: skip
    helper_model.add("first reply", "second reply")
    client = await served.client()
    first = await last_task(client, message("remember the number 7"))
    assert first.status.state == TaskState.TASK_STATE_COMPLETED
    assert said(first) == "first reply"
    second = await last_task(client, message("which number?", context_id=first.context_id))
    assert said(second) == "second reply"
    seen = "\n".join(m.content for m in helper_model.calls[1].messages)
    assert "remember the number 7" in seen and "first reply" in seen
    got = await client.get_task(GetTaskRequest(id=second.id))
    assert got.status.state == TaskState.TASK_STATE_COMPLETED


async def test_the_messages_metadata_role_is_read_and_wins_over_the_requests(
    served: Served, helper_model: ScriptedModel
) -> None:
    """The a2a-sdk client puts per-message data on the message (README: "a message runs the
    role named in its metadata.role"); the request's is read too, the message's wins."""
    helper_model.add("on the message", "message wins")
    client = await served.client()
    assert len(served.runtime.catalog.roles) > 1  # (the role must be named)

    def sent(text: str, request: dict[str, Any]) -> SendMessageRequest:
        msg = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)])
        msg.metadata.update({"role": "helper"})
        return SendMessageRequest(message=msg, metadata=request)

    only = await last_task(client, sent("hello", {}))
    assert only.status.state == TaskState.TASK_STATE_COMPLETED, said(only)
    assert said(only) == "on the message"
    both = await last_task(client, sent("hello again", {"role": "no-such-role"}))
    assert both.status.state == TaskState.TASK_STATE_COMPLETED, said(both)
    assert said(both) == "message wins"


async def test_a_question_is_input_required_and_the_answer_goes_on(
    served: Served, helper_model: ScriptedModel
) -> None:
    helper_model.add(call_tool("AskParent", {"question": "Which colour?"}), "painted it")
    client = await served.client(streaming=True)
    updates: list[Any] = []
    asked = await last_task(client, message("paint the door"), updates)
    working = [u for u in updates if u.status.state == TaskState.TASK_STATE_WORKING]
    progress = "\n".join(p.text for u in working for p in u.status.message.parts)
    assert '"kind": "run_started"' in progress  # the sub-agent's events, as status updates
    assert updates[-1].status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert said(asked) == "Which colour?"
    done = await last_task(client, message("green", context_id=asked.context_id,
                                           task_id=asked.id))  # fmt: skip
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert said(done) == "painted it"
    assert helper_model.calls[-1].messages[-1].content == "green"  # AskParent's result
    assert len(helper_model.calls) == 2  # the same turn went on


async def test_cancel_interrupts_and_unload_consolidates(
    served: Served, helper_model: ScriptedModel
) -> None:
    helper_model.add("too late", "after the cancel", memorize("the door is green"))
    helper_model.delay = 30  # the first call hangs until it is cancelled
    client = await served.client()
    config = ClientConfig(httpx_client=served.http(), streaming=False, polling=True)
    quick = await ClientFactory(config).create_from_url(served.url)
    request = message("work slowly")
    request.configuration.return_immediately = True
    running = await last_task(quick, request)
    while helper_model.call_count == 0:
        await asyncio.sleep(0.02)
    canceled = await client.cancel_task(CancelTaskRequest(id=running.id))
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    helper_model.delay = 0
    got = await client.get_task(GetTaskRequest(id=running.id))
    assert got.status.state == TaskState.TASK_STATE_CANCELED
    again = await last_task(client, message("go on", context_id=running.context_id))
    assert said(again) == "after the cancel"
    ended = await last_task(client, message("bye", context_id=running.context_id, unload=True))
    assert ended.status.state == TaskState.TASK_STATE_COMPLETED
    assert helper_model.remaining == 0  # the memory turn ran: consolidated
    assert "memorize" in [t.name for t in helper_model.calls[-1].tools]
    assert not served.runtime.manager.registry.held_by("a2a-client")


async def test_each_token_is_a_parent_of_its_own_and_owns_its_tasks(
    served: Served, helper_model: ScriptedModel
) -> None:
    helper_model.add("for the service", "for bob")
    service = await served.client()
    bob = await served.client(token=served.book.issue("bob"))
    mine = await last_task(service, message("SECRET-service"))
    theirs = await last_task(bob, message("hello", context_id=mine.context_id))
    assert said(theirs) == "for bob"
    assert "SECRET-service" not in "\n".join(m.content for m in helper_model.calls[1].messages)
    parents = {h.parent_id for h in served.runtime.manager.registry.held_by()}
    assert parents == {"a2a-client", "a2a-client-bob"}
    with pytest.raises(Exception, match=r"(?i)not found"):
        await bob.get_task(GetTaskRequest(id=mine.id))


JS = Path(__file__).with_name("js")


async def drive_js(served: Served, *args: str) -> dict[str, Any]:
    """Run the @a2a-js/sdk script (tests/a2a/js/drive.mjs) against the server."""
    env = {**os.environ, "A2A_TOKEN": served.token}
    proc = await asyncio.create_subprocess_exec(
        "node", str(JS / "drive.mjs"), served.url, *args, cwd=JS, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 50)
    assert proc.returncode == 0, err.decode()[-2000:]
    return json.loads(out.decode().strip().splitlines()[-1])


@pytest.mark.skipif(
    shutil.which("node") is None or not (JS / "node_modules" / "@a2a-js" / "sdk").is_dir(),
    reason="needs node and tests/a2a/js/node_modules (cd tests/a2a/js && npm ci; .ci/run does)",
)
async def test_the_a2a_js_sdk_client_drives_the_server(
    served: Served, helper_model: ScriptedModel
) -> None:
    """The same scenarios with a second, independent implementation: @a2a-js/sdk 1.3.0."""
    completed, asking, canceled = "3", "6", "5"  # its TaskState numbers (the protobuf enum)
    ask = call_tool("AskParent", {"question": "Which colour?"})
    helper_model.add("first reply", "second reply", ask, "painted it")
    talk = await drive_js(served, "talk")
    assert (talk["first"]["state"], talk["first"]["text"]) == (completed, "first reply")
    assert talk["second"]["text"] == "second reply"
    seen = "\n".join(m.content for m in helper_model.calls[1].messages)
    assert "remember the number 7" in seen and "first reply" in seen  # one context
    assert (talk["asked"]["state"], talk["asked"]["text"]) == (asking, "Which colour?")
    assert (talk["answered"]["state"], talk["answered"]["text"]) == (completed, "painted it")
    assert helper_model.calls[-1].messages[-1].content == "green"  # AskParent's answer

    helper_model.add("too late", "after the cancel", memorize("the door is green"))
    helper_model.delay = 30  # the next call hangs until it is cancelled
    cancel = await drive_js(served, "cancel")
    helper_model.delay = 0
    assert cancel["canceled"]["state"] == canceled and cancel["after"]["state"] == canceled
    context = cancel["running"]["context"]
    unload = await drive_js(served, "unload", context)
    assert unload["again"]["text"] == "after the cancel"
    assert unload["ended"]["state"] == completed
    assert helper_model.remaining == 0  # consolidated
    held = {h.key.instance for h in served.runtime.manager.registry.held_by("a2a-client")}
    assert context not in held and talk["first"]["context"] in held  # only that one ended
