"""Durable sessions in the service (one process, SQLite): the trees survive the service's
stop and a restart, and a recorded session is shown, read and answered over HTTP before its
tree is loaded again."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path

import httpx
import pytest
from serverkit import Serve, wait_for
from test_cli_remote import retinue

from retinue.config import Settings
from retinue.llm.base import ToolSpec
from retinue.messages import Message, ToolResultMessage
from retinue.runtime import Runtime
from retinue.server.conversations import ConversationHost
from retinue.server.hub import EventHub
from retinue.subagents import Role
from retinue.testing import ScriptedModel, call_tool

pytestmark = pytest.mark.timeout(180)  # a hang bound

HELPER = Role("helper", "helps", "You help.", ("AskParent",), "scripted:helper")


def said(messages: Sequence[Message], _tools: Sequence[ToolSpec]) -> str:
    """What the helper was told so far, turn by turn (a lost turn shows)."""
    return "helper heard: " + " | ".join(m.content for m in messages if m.role == "user")


def host_on(tmp_path: Path, main: ScriptedModel, helper: ScriptedModel) -> ConversationHost:
    settings = Settings(home=tmp_path / "home", workspace=tmp_path, durable_sessions=True)
    runtime = Runtime.create(settings, model=main, model_for=lambda _s: helper, roles=[HELPER])
    return ConversationHost(runtime, EventHub())


def delegate(task: str) -> dict[str, object]:
    return {"role": "helper", "interactive": True, "task": task}


async def test_a_kept_session_survives_the_services_stop_with_its_whole_history(
    tmp_path: Path,
) -> None:
    first = host_on(
        tmp_path,
        ScriptedModel([call_tool("SubAgent", delegate("one")), "asked it"]),
        ScriptedModel(responder=said, name="scripted:helper"),
    )
    await first.send("c1", "start", keep_sessions=True)
    await first.close_all()  # a deploy: the tree is kept, not consolidated
    assert first.runtime.manager.sessions() == []
    records = await first.records()
    assert {r.id: r.state for r in records} == {"conv-c1": "idle", "conv-c1/helper": "idle"}

    helper = ScriptedModel(responder=said, name="scripted:helper")
    again = host_on(
        tmp_path, ScriptedModel([call_tool("SubAgent", delegate("two")), "asked again"]), helper
    )
    try:
        out = await again.send("c1", "more", keep_sessions=True)
        assert out.content == "asked again"
        result = next(m for m in reversed(again.runtime.manager.history("conv-c1/helper"))
                      if m.role == "assistant")  # fmt: skip
        assert result.content == "helper heard: one | two"  # its first turn is there
        main = await again.history("c1")
        assert main is not None and [m.content for m in main if m.role == "user"] == [
            "start",
            "more",
        ]
    finally:
        await again.close_all()


async def test_a_sub_agents_question_is_answered_after_a_restart(tmp_path: Path) -> None:
    first = host_on(
        tmp_path,
        ScriptedModel([call_tool("SubAgent", delegate("paint")), "it asks"]),
        ScriptedModel([call_tool("AskParent", {"question": "which colour?"})], name="s:h"),
    )
    await first.send("c1", "start", keep_sessions=True)
    await first.close_all()

    helper = ScriptedModel(["painted it blue"], name="s:h")
    again = host_on(tmp_path, ScriptedModel(), helper)
    try:
        (recorded,) = [r for r in await again.records() if r.kind != "main"]
        assert (recorded.id, recorded.state, recorded.question) == (
            "conv-c1/helper",
            "asking",
            "which colour?",
        )
        manager = again.runtime.manager
        done = await again.act_on_session("conv-c1/helper", lambda: manager.answer(
            "conv-c1/helper", "blue"))  # fmt: skip
        assert done is True
        held = manager.registry.by_id("conv-c1/helper")
        assert held is not None
        await held.session.wait_background()
        assert held.session.collect() == ["painted it blue"]
        answer = helper.calls[0].messages[-1]
        assert isinstance(answer, ToolResultMessage) and answer.content == "blue"
    finally:
        await again.close_all()


async def test_deleting_a_conversation_forgets_its_records(tmp_path: Path) -> None:
    host = host_on(
        tmp_path,
        ScriptedModel([call_tool("SubAgent", delegate("one")), "ok"]),
        ScriptedModel(responder=said, name="scripted:helper"),
    )
    await host.send("c1", "start", keep_sessions=True)
    assert len(await host.records()) == 2
    assert await host.delete("c1") == ["conv-c1/helper"]
    assert await host.records() == []
    await host.close_all()


async def test_without_durable_sessions_nothing_is_recorded(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home", workspace=tmp_path)
    model = ScriptedModel([call_tool("SubAgent", delegate("one")), "ok"])
    runtime = Runtime.create(
        settings,
        model=model,
        model_for=lambda _s: ScriptedModel(responder=said, name="scripted:helper"),
        roles=[HELPER],
    )
    host = ConversationHost(runtime, EventHub())
    await host.send("c1", "start", keep_sessions=True)
    assert host.journal is None and await host.records() == []
    assert runtime.memory is not None and await runtime.memory.journal.records() == []
    await host.close_all()


def test_recorded_sessions_are_listed_read_and_answered_over_http(
    serve: Serve, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("RETINUE_DURABLE_SESSIONS", "1")
    slow = ScriptedModel([call_tool("AskParent", {"question": "may I?"})], name="scripted:slow")
    main = ScriptedModel(
        [call_tool("SubAgent", {"role": "slowpoke", "interactive": True, "task": "do it"}), "ok"]
    )
    server = serve(main, slow, memory=True)
    with server.client() as client:
        body = {"content": "go", "keep_sessions": True}
        assert client.post("/v1/conversations/c1/messages", json=body).status_code == 200
    server.stop()  # its trees are kept

    later = ScriptedModel(["did it"], name="scripted:slow")
    again = serve(ScriptedModel(), later, memory=True)
    sid = "conv-c1/slowpoke"
    shown_cli = retinue(["sessions", "--url", again.url, "--token", again.token], tmp_path)
    assert shown_cli.returncode == 0, shown_cli.stderr
    assert "recorded, not loaded" in shown_cli.stdout and sid in shown_cli.stdout
    assert "may I?" in shown_cli.stdout and "asking" in shown_cli.stdout
    with again.client() as client:
        listed = client.get("/v1/sessions").json()
        assert listed["sessions"] == []
        (recorded,) = listed["recorded"]
        assert (recorded["id"], recorded["state"], recorded["question"]) == (
            sid,
            "asking",
            "may I?",
        )
        shown = client.get(f"/v1/sessions/{sid}").json()
        assert shown["loaded"] is False and shown["history"][-1]["role"] == "assistant"
        answered = client.post(f"/v1/sessions/{sid}/answer", json={"content": "yes"})
        assert answered.json() == {"id": sid, "answered": True}

        def idle() -> bool:
            info = client.get(f"/v1/sessions/{sid}").json()
            return info.get("state") == "idle" and info.get("unread") == 1

        wait_for(idle)
        missing = client.post("/v1/sessions/conv-c9/x/answer", json={"content": "?"})
        assert missing.status_code == 404
    assert isinstance(client, httpx.Client)


async def test_the_main_agents_question_is_answered_after_a_restart(tmp_path: Path) -> None:
    def going_on(messages: Sequence[Message], _tools: Sequence[ToolSpec]) -> str:
        return f"going with {messages[-1].content}"

    first = host_on(
        tmp_path,
        ScriptedModel([call_tool("AskParent", {"question": "which port?"})]),
        ScriptedModel(name="scripted:helper"),
    )
    asked = await first.send("q", "set it up")
    assert (asked.stop_reason, asked.content) == ("asking", "which port?")
    await first.close_all()
    again = host_on(tmp_path, ScriptedModel(responder=going_on), ScriptedModel(name="s:h"))
    try:
        answered = await again.send("q", "8080")
        assert (answered.stop_reason, answered.content) == ("final", "going with 8080")
        history = await again.history("q")
        assert history is not None
        assert [m.role for m in history] == ["system", "user", "assistant", "tool", "assistant"]
    finally:
        await again.close_all()


async def test_a_conversation_only_recorded_in_the_journal_is_listed(tmp_path: Path) -> None:
    """A worker died before it saved the history: the journal's record is all there is, and
    the list shows the conversation before anyone recovers it (issue 41)."""
    from retinue.messages import SystemMessage, UserMessage
    from retinue.store.journal import SessionRecord

    host = host_on(tmp_path, ScriptedModel(), ScriptedModel(name="scripted:helper"))
    try:
        assert host.journal is not None
        rec = SessionRecord("conv-c9", "conv-c9", None, "main", "main", state="running")
        history = [SystemMessage("sys"), UserMessage("count the files")]
        await host.journal.record(host.tenant, rec, history)
        child = SessionRecord("conv-c9/helper", "conv-c9", "conv-c9", "interactive", "helper")
        await host.journal.record(host.tenant, child, [UserMessage("a sub-agent's own")])
        views = {v.id: v for v in await host.views()}
        assert set(views) == {"c9"}  # one conversation: its sub-agent is not another
        assert (views["c9"].title, views["c9"].messages) == ("count the files", 2)
        assert views["c9"].updated_at > 0
    finally:
        await host.close_all()


async def test_a_sub_agent_waiting_for_approval_keeps_it_when_its_worker_dies(
    tmp_path: Path,
) -> None:
    """Its call never ran: the tree revived elsewhere asks for it again (not "cut short"),
    and the yes given there runs it (issue 41)."""
    import asyncio
    import time

    from retinue.durable import RESTARTED_RESULT, suspend_tree
    from retinue.policy.approvals import Approval

    scribe = Role("scribe", "writes", "You write.", ("Write",), "scripted:scribe")
    write = call_tool("Write", {"file_path": "note.txt", "content": "hello"})

    def host(main: ScriptedModel, helper: ScriptedModel) -> ConversationHost:
        settings = Settings(home=tmp_path / "home", workspace=tmp_path, durable_sessions=True)
        runtime = Runtime.create(settings, model=main, model_for=lambda _s: helper,
                                 roles=[scribe], permission_mode="default")  # fmt: skip
        return ConversationHost(runtime, EventHub())

    async def waiting(h: ConversationHost) -> list:
        for _ in range(3000):  # a hang bound, polled
            if found := await h.approvals("c1"):
                return found
            await asyncio.sleep(0.02)
        raise AssertionError("no approval was asked for")

    task = {"role": "scribe", "interactive": True, "task": "write a note"}
    first = host(ScriptedModel([call_tool("SubAgent", task)]),
                 ScriptedModel([write], name="scripted:scribe"))  # fmt: skip
    turn = asyncio.create_task(first.send("c1", "start"))
    [asked] = await waiting(first)
    assert (asked.agent_id, asked.tool) == ("conv-c1/scribe", "Write")
    assert first.journal is not None
    recorded = await first.journal.load(first.tenant, "conv-c1/scribe")
    assert recorded is not None and recorded[0].extra.get("awaiting") == [asked.call_id]
    await suspend_tree(first._live["c1"].conversation)  # the worker dies here
    turn.cancel()
    with contextlib.suppress(BaseException):
        await turn

    helper = ScriptedModel(["wrote it"], name="scripted:scribe")
    second = host(ScriptedModel(["the scribe is on it"]), helper)
    try:
        assert await second.recover(older_than=time.time() + 1) == ["c1"]
        [again] = await waiting(second)
        assert (again.agent_id, again.call_id) == ("conv-c1/scribe", asked.call_id)
        assert await second.approve("c1", again.id, Approval(True))
        for _ in range(3000):  # a hang bound, polled
            if helper.call_count:
                break
            await asyncio.sleep(0.02)
        assert (tmp_path / "note.txt").read_text() == "hello"
        results = [m for m in helper.calls[0].messages if isinstance(m, ToolResultMessage)]
        assert [r.content for r in results] != [RESTARTED_RESULT]
        assert results[-1].name == "Write" and not results[-1].is_error
    finally:
        await second.close_all()
        await first.close_all()
