"""Retinue's A2A client against a plain ``a2a-sdk`` server started by the test (its own small
agent, not Retinue's): a role file's ``a2a: <url>`` is a role like any other to the parent:
an interactive session is one remote context, the remote's ``input-required`` is the
parent's ``[session … asks: …]`` and its answer goes to the waiting task, unload ends the
context (a task still waiting is cancelled), and only the role's own header is sent."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import uvicorn
from a2a.helpers.proto_helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, Part
from starlette.applications import Starlette
from typer.testing import CliRunner

from retinue.cli.app import app
from retinue.config import Settings
from retinue.llm.a2a import parse_remote
from retinue.runtime import Runtime
from retinue.testing import ScriptedModel, call_tool

pytestmark = pytest.mark.timeout(60)


class Remote(AgentExecutor):
    """A small remote agent: counts the turns of each context, asks when told to."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str]] = []  # (context, task, text)
        self.turns: dict[str, int] = {}
        self.cancelled: list[str] = []
        self.headers: list[dict[str, str]] = []

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        self.headers.append(dict(context.call_context.state.get("headers", {})))
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        text = context.get_user_input()
        self.seen.append((task.context_id, task.id, text))
        say = lambda s: updater.new_agent_message([Part(text=s)])  # noqa: E731
        if "please ask" in text:
            await updater.requires_input(say("Which colour?"))
            return
        if context.current_task is not None:  # the answer to its question
            await updater.complete(say(f"colour: {text}"))
            return
        n = self.turns[task.context_id] = self.turns.get(task.context_id, 0) + 1
        await updater.complete(say(f"remote says: {text} (turn {n})"))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        assert task is not None
        self.cancelled.append(task.id)
        await TaskUpdater(event_queue, task.id, task.context_id).cancel()


@pytest.fixture
async def remote() -> AsyncIterator[tuple[Remote, str]]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/"
    interface = AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
    card = AgentCard(name="remote", description="a test agent", version="1",
                     supported_interfaces=[interface],
                     capabilities=AgentCapabilities(streaming=False),
                     default_input_modes=["text/plain"],
                     default_output_modes=["text/plain"])  # fmt: skip
    executor = Remote()
    handler = DefaultRequestHandler(agent_executor=executor, task_store=InMemoryTaskStore(),
                                    agent_card=card)  # fmt: skip
    app = Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/")])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        await asyncio.sleep(0.02)
    try:
        yield executor, url
    finally:
        server.should_exit = True
        await asyncio.to_thread(thread.join, 15)


def said(model: ScriptedModel, call: int) -> str:
    return model.calls[call].messages[-1].content


async def test_a_remote_role_is_interactive_asks_and_is_unloaded(
    tmp_path: Path, remote: tuple[Remote, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    executor, url = remote
    monkeypatch.setenv("REMOTE_TOKEN", "s3cret")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-sent")
    agents = tmp_path / ".retinue" / "agents"
    agents.mkdir(parents=True)
    (agents / "remote.md").write_text("---\nname: remote\ndescription: a remote agent\n"
                                      f"a2a: {url}\na2aAuthEnv: REMOTE_TOKEN\n---\n")  # fmt: skip
    sub = {"role": "remote", "interactive": True}
    settings = Settings.load(home=tmp_path / "home", workspace=tmp_path)
    refused_model = ScriptedModel([call_tool("SubAgent", {"task": "hello", **sub}), "refused"])
    runtime = Runtime.create(settings, model=refused_model, with_memory=False)
    await runtime.conversation().send("go")
    refusal = said(refused_model, 1)  # a workspace file may not name a URL unapproved
    assert "not approved" in refusal and "retinue a2a approve remote" in refusal
    assert executor.seen == []
    env = {"RETINUE_HOME": str(tmp_path / "home")}
    approved = CliRunner().invoke(app, ["a2a", "approve", "remote", "-w", str(tmp_path)], env=env)
    assert approved.exit_code == 0, approved.output
    assert "approved: role 'remote'" in approved.output
    model = ScriptedModel([
        call_tool("SubAgent", {"task": "hello", **sub}),
        call_tool("SubAgent", {"task": "again", **sub}),
        call_tool("SubAgent", {"task": "please ask", **sub}),
        call_tool("SubAgent", {"task": "teal", **sub}),
        call_tool("SubAgent", {"task": "please ask", **sub}),
        call_tool("UnloadSubAgent", {"role": "remote"}),
        "done",
    ])  # fmt: skip
    runtime = Runtime.create(settings, model=model, with_memory=False)
    out = await runtime.conversation(keep_sessions=True).send("go")
    assert out.content == "done"
    assert "remote says: hello (turn 1)" in said(model, 1)
    assert "remote says: again (turn 2)" in said(model, 2)  # one context, its history there
    assert "asks: Which colour?" in said(model, 3)
    assert "colour: teal" in said(model, 4)
    assert "asks: Which colour?" in said(model, 5)
    contexts = {c for c, _, _ in executor.seen}
    assert len(contexts) == 1
    [(_, asked_task, _)] = [s for s in executor.seen if s[2] == "please ask"][:1]
    assert (next(c for c in executor.seen if c[2] == "teal"))[1] == asked_task  # same task
    waiting = [t for _, t, x in executor.seen if x == "please ask"][-1]
    assert executor.cancelled == [waiting]  # unload ended the context's waiting task
    assert all(h.get("authorization") == "Bearer s3cret" for h in executor.headers)
    assert not any("sk-never-sent" in v for h in executor.headers for v in h.values())
    assert not runtime.manager.registry.held_by()


def test_a_bad_remote_is_a_clear_role_error() -> None:
    assert parse_remote("ftp://x", None) == "a2a 'ftp://x' is not an http(s) URL"
    assert "a2aAuthEnv" in str(parse_remote("http://127.0.0.1:1/", "BAD NAME"))
    ok = parse_remote("http://127.0.0.1:1/", "TOKEN")
    assert not isinstance(ok, str) and ok.auth_env == "TOKEN"
