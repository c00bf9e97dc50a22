"""Conversations survive a restart: stored in the memory database, restored by their next
message, forgotten by delete; real servers over one data directory, the models scripted."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from fastapi import FastAPI
from serverkit import WAIT_S, Serve, wait_for

from retinue.config import Settings
from retinue.engine.session import INTERRUPTED_NOTE
from retinue.events import Event
from retinue.llm.base import ToolSpec
from retinue.messages import Message
from retinue.runtime import Runtime
from retinue.server.conversations import ConversationHost, Limits
from retinue.server.hub import EventHub
from retinue.testing import ScriptedModel

pytestmark = pytest.mark.timeout(60)


def said(messages: Sequence[Message]) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in messages if m.role != "system"]


def test_a_conversation_survives_a_restart(serve: Serve) -> None:
    first = serve(ScriptedModel(["Hello Ada.", "Four."]), memory=True)
    with first.client() as client:
        client.post("/v1/conversations/chat/messages", json={"content": "My name is Ada."})
        client.post("/v1/conversations/chat/messages", json={"content": "2+2?"})
    first.stop()

    def recall(messages: Sequence[Message], _tools: Sequence[ToolSpec]) -> str:
        earlier = [text for role, text in said(messages) if role == "user"]
        return f"You are Ada; you asked {len(earlier) - 1} thing(s) before."

    model = ScriptedModel([recall])
    second = serve(model, memory=True)
    with second.client() as client:
        [listed] = client.get("/v1/conversations").json()["conversations"]
        assert listed["id"] == "chat" and listed["title"] == "My name is Ada."
        assert listed["messages"] == 5 and listed["running"] is False
        shown = client.get("/v1/conversations/chat").json()
        assert [(m["role"], m["content"]) for m in shown["messages"][1:]] == [
            ("user", "My name is Ada."),
            ("assistant", "Hello Ada."),
            ("user", "2+2?"),
            ("assistant", "Four."),
        ]
        assert shown["running"] is False
        answer = client.post("/v1/conversations/chat/messages", json={"content": "Who am I?"})
        assert answer.json()["content"] == "You are Ada; you asked 2 thing(s) before."
    assert said(model.calls[0].messages) == [
        ("user", "My name is Ada."),
        ("assistant", "Hello Ada."),
        ("user", "2+2?"),
        ("assistant", "Four."),
        ("user", "Who am I?"),
    ]
    assert model.calls[0].messages[0].role == "system"  # the stored prompt, once


def test_deleting_a_stored_conversation_forgets_its_history(serve: Serve) -> None:
    first = serve(ScriptedModel(["one"]), memory=True)
    with first.client() as client:
        client.post("/v1/conversations/gone/messages", json={"content": "remember me"})
    first.stop()
    model = ScriptedModel(["fresh start"])
    second = serve(model, memory=True)
    with second.client() as client:
        deleted = client.delete("/v1/conversations/gone")
        assert deleted.status_code == 200 and deleted.json()["deleted"] == "gone"
        assert client.get("/v1/conversations/gone").status_code == 404
        assert client.get("/v1/conversations").json()["conversations"] == []
        assert client.delete("/v1/conversations/gone").status_code == 404
        client.post("/v1/conversations/gone/messages", json={"content": "hi again"})
    assert said(model.calls[0].messages) == [("user", "hi again")]


def test_a_live_conversation_is_deleted_from_the_store_too(serve: Serve) -> None:
    server = serve(ScriptedModel(["one"]), memory=True)
    with server.client() as client:
        client.post("/v1/conversations/live/messages", json={"content": "x"})
        assert client.delete("/v1/conversations/live").status_code == 200
        assert client.get("/v1/conversations/live").status_code == 404
    server.stop()
    again = serve(ScriptedModel(), memory=True)
    with again.client() as client:
        assert client.get("/v1/conversations").json()["conversations"] == []


def test_a_conversation_deleted_mid_turn_is_not_stored_again(serve: Serve) -> None:
    model = ScriptedModel(["first", "never seen"])
    server = serve(model, memory=True)
    with server.client() as client, ThreadPoolExecutor(1) as pool:
        client.post("/v1/conversations/x/messages", json={"content": "one"})
        model.delay = 30
        turn = pool.submit(client.post, "/v1/conversations/x/messages", json={"content": "two"})
        wait_for(lambda: model.call_count == 2)  # the second turn waits for its model
        assert client.delete("/v1/conversations/x").status_code == 200
        assert turn.result(timeout=WAIT_S).status_code == 409
        assert client.get("/v1/conversations/x").status_code == 404
    server.stop()
    again = serve(ScriptedModel(), memory=True)
    with again.client() as client:
        assert client.get("/v1/conversations").json()["conversations"] == []


def test_an_evicted_conversation_comes_back_with_its_history(serve: Serve) -> None:
    model = ScriptedModel(["first", "second"])
    server = serve(model, memory=True, limits=Limits(idle_s=0.2))
    app = server.server.config.app
    assert isinstance(app, FastAPI)
    host: ConversationHost = app.state.host
    with server.client() as client:
        client.post("/v1/conversations/e/messages", json={"content": "one"})
        wait_for(lambda: host.ids() == [])  # evicted from memory
        [listed] = client.get("/v1/conversations").json()["conversations"]
        assert listed["id"] == "e" and listed["messages"] == 3
        client.post("/v1/conversations/e/messages", json={"content": "two"})
    earlier = [("user", "one"), ("assistant", "first"), ("user", "two")]
    assert said(model.calls[1].messages) == earlier


def test_nothing_is_stored_when_keeping_conversations_is_off(serve: Serve, tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "config.toml").write_text("keep_conversations = false\n")
    first = serve(ScriptedModel(["one"]), memory=True)
    with first.client() as client:
        client.post("/v1/conversations/c/messages", json={"content": "x"})
        assert [c["id"] for c in client.get("/v1/conversations").json()["conversations"]] == ["c"]
    first.stop()
    second = serve(ScriptedModel(), memory=True)
    with second.client() as client:
        assert client.get("/v1/conversations").json()["conversations"] == []
        assert client.get("/v1/conversations/c").status_code == 404


def test_bad_and_unknown_conversation_ids(serve: Serve) -> None:
    server = serve(ScriptedModel(), memory=True)
    with server.client() as client:
        assert client.get("/v1/conversations/nope").json() == {"error": "no conversation 'nope'"}
        bad = client.get("/v1/conversations/..bad!")
        assert bad.status_code == 400 and "bad conversation id" in bad.json()["error"]


def runtime_over(home: Path, workspace: Path, model: ScriptedModel) -> Runtime:
    settings = Settings.load(home=home, workspace=workspace)
    return Runtime.create(settings, model=model, model_for=lambda _s: model)


async def test_a_turn_running_when_the_service_stops_is_closed_and_kept(
    tmp_path: Path,
) -> None:
    model = ScriptedModel(["first answer", "never seen"])
    runtime = runtime_over(tmp_path / "home", tmp_path, model)
    host = ConversationHost(runtime, EventHub())
    await host.send("c", "first")
    model.delay = 30
    turn = host.start("c", "second, cut off")
    while model.call_count < 2:  # the second turn waits for its model
        await asyncio.sleep(0.01)
    await host.close_all()  # the service stops mid-turn
    assert turn.done()

    def events(_e: Event) -> None: ...

    model2 = ScriptedModel(["third answer"])
    host2 = ConversationHost(runtime_over(tmp_path / "home", tmp_path, model2), EventHub(events))
    out = await host2.send("c", "third")
    assert out.content == "third answer"
    assert said(model2.calls[0].messages) == [
        ("user", "first"),
        ("assistant", "first answer"),
        ("user", "second, cut off"),
        ("assistant", INTERRUPTED_NOTE),
        ("user", "third"),
    ]
    await host2.close_all()


async def test_a_conversation_deleted_while_it_loads_is_not_brought_back(
    tmp_path: Path,
) -> None:
    model = ScriptedModel(["kept"])
    host = ConversationHost(runtime_over(tmp_path / "home", tmp_path, model), EventHub())
    await host.send("c", "one")
    await host.close_all()
    host2 = ConversationHost(runtime_over(tmp_path / "home", tmp_path, model), EventHub())
    sending = asyncio.ensure_future(host2.send("c", "two"))
    await asyncio.sleep(0)  # the send has begun loading the stored history
    assert await host2.delete("c") == []
    with pytest.raises(Exception, match="deleted"):
        await sending
    assert await host2.history("c") is None
    await host2.close_all()


async def test_a_store_that_fails_to_save_loses_neither_the_answer_nor_the_history(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model = ScriptedModel(["first answer", "second answer"])
    runtime = runtime_over(tmp_path / "home", tmp_path, model)
    store = runtime.conversations
    assert store is not None
    real_save = store.save
    failing = True

    async def flaky_save(*args: object, **kwargs: object) -> None:
        if failing:
            raise OSError("disk full")
        await real_save(*args, **kwargs)  # type: ignore[arg-type]

    store.save = flaky_save  # type: ignore[method-assign]
    host = ConversationHost(runtime, EventHub())
    out = await host.send("c", "first")
    assert out.content == "first answer"  # the answer reaches the client all the same
    assert "could not save conversation 'c': disk full" in caplog.text
    failing = False
    await host.send("c", "second")  # the next save writes the unsaved tail too
    await host.close_all()
    stored = await store.load(runtime.settings.tenant, "c")
    assert stored is not None
    assert said(stored) == [
        ("user", "first"),
        ("assistant", "first answer"),
        ("user", "second"),
        ("assistant", "second answer"),
    ]
