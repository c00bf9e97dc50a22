"""Several ``retinue serve`` workers on one PostgreSQL database (real processes, a real
server started for this module, the model scripted behind a loopback OpenAI server).

One conversation's messages alternate between two workers and end with the same history as
on one worker; a conversation that keeps its sessions on one worker is refused by the other
(409 naming the holder); a worker killed mid-turn leaves a lease that expires, and the other
worker continues the conversation from its last saved turn. A consolidation that failed is
retried once, by whichever of several workers claims it; a turn whose lease another worker
took over is not saved. The main agent's question to the user outlives the turn that asked
it: it is stored (not closed as interrupted when the worker frees the conversation), and the
answer sent to another worker goes on with the same turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from serverkit import HeldModel

from memory.backends import start_pg_server
from retinue.config import Settings
from retinue.errors import ModelError
from retinue.llm.base import ToolSpec
from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.memory import ConsolidationOptions, PostgresMemory
from retinue.messages import AssistantMessage, Message, ToolResultMessage, UserMessage
from retinue.runtime import Runtime
from retinue.server.conversations import ConversationHeld, ConversationHost, question_in
from retinue.server.hub import EventHub
from retinue.testing import ScriptedModel, call_tool

pytestmark = pytest.mark.timeout(120)


def human_block(url: str) -> list[str]:
    """The main agent's ``human`` core block (tenant ``default``) in the shared database."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT value FROM blocks WHERE tenant = 'default' AND role = 'main' AND name = 'human'"
        ).fetchone()
    return str(row[0]).splitlines() if row else []


@pytest.fixture(scope="module")
def pg_urls() -> Iterator[tuple[str, str]]:
    """Two databases on one server: the workers' shared one, and one for a lone worker."""
    server, url = start_pg_server()
    try:
        yield url, server.create_database("alone")
    finally:
        server.stop()


class Worker:
    """``retinue serve`` in a process of its own, with its own data directory."""

    def __init__(
        self,
        home: Path,
        provider: LoopbackOpenAIServer,
        database_url: str,
        *args: str,
        env: dict[str, str] | None = None,
    ) -> None:
        """``args`` go to ``retinue serve``; ``env`` joins its environment."""
        environ = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RETINUE_"))}
        environ |= {
            "RETINUE_HOME": str(home),
            "RETINUE_BLOCK_REAL_MODELS": "1",
            "RETINUE_DATABASE_URL": database_url,
            "OPENAI_BASE_URL": provider.base_url,
            "OPENAI_API_KEY": "test-key",
            **(env or {}),
        }
        home.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "retinue", "serve", "--port", "0", "-m", "openai:test", "-q",
             "--lease", "1", *args],
            env=environ, cwd=home, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self.proc.stderr is not None
        banner = self.proc.stderr.readline()
        assert banner.startswith("retinue serving"), banner + self.proc.stderr.read()
        self.url = banner.split()[-1]
        token = (home / "server-token").read_text().strip()
        self.client = httpx.Client(
            base_url=self.url, timeout=60, headers={"Authorization": f"Bearer {token}"}
        )

    def say(self, cid: str, text: str) -> str:
        reply = self.client.post(f"/v1/conversations/{cid}/messages", json={"content": text})
        assert reply.status_code == 200, reply.text
        return str(reply.json()["content"])

    def history(self, cid: str) -> list[tuple[str, str]]:
        shown = self.client.get(f"/v1/conversations/{cid}").json()["messages"]
        return [(m["role"], m["content"]) for m in shown if m["role"] != "system"]

    def stop(self) -> None:
        self.client.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        assert self.proc.stderr is not None
        self.proc.stderr.close()


class CountingModel:
    """Answers with what it was shown (so a lost or doubled message shows in the answer);
    ``remember X`` first appends X to the agent's core memory; a message ``hang`` blocks
    until :attr:`release` is set."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.hanging = threading.Event()

    def __call__(self, messages: Sequence[Message], _tools: Sequence[ToolSpec]) -> str | Any:
        said = [m.content for m in messages if m.role == "user"]
        if said[-1].startswith("remember ") and messages[-1].role == "user":
            fact = said[-1].removeprefix("remember ")
            return call_tool("core_memory_append", {"block": "human", "content": fact})
        if said[-1] == "hang":
            self.hanging.set()
            self.release.wait(30)
        return f"heard {len(said)}: {' | '.join(said)}"


def test_two_workers_share_a_conversation_and_one_dies_mid_turn(
    pg_urls: tuple[str, str], tmp_path: Path
) -> None:
    pg_url, alone_url = pg_urls
    counting = CountingModel()
    with LoopbackOpenAIServer(ScriptedModel(responder=counting), record=False) as provider:
        a = Worker(tmp_path / "a", provider, pg_url)
        b = Worker(tmp_path / "b", provider, pg_url)
        try:
            texts = ["one", "remember Ada likes tea", "three", "four"]
            shared = [(a if i % 2 == 0 else b).say("chat", t) for i, t in enumerate(texts)]
            lone = Worker(tmp_path / "lone", provider, alone_url)
            try:
                alone = [lone.say("chat", t) for t in texts]
                assert a.history("chat") == b.history("chat") == lone.history("chat")
            finally:
                lone.stop()
            assert shared == alone
            assert shared[-1] == "heard 4: one | remember Ada likes tea | three | four"
            assert human_block(pg_url) == human_block(alone_url) == ["Ada likes tea"]

            kept = {"content": "keep", "keep_sessions": True}
            assert a.client.post("/v1/conversations/kept/messages", json=kept).status_code == 200
            refused = b.client.post("/v1/conversations/kept/messages", json={"content": "x"})
            assert refused.status_code == 409
            assert f":{a.proc.pid}:" in refused.json()["error"]
            assert "keeps its sessions on worker" in refused.json()["error"]
            a.say("kept", "done keeping")  # without keep_sessions: the hold ends
            assert b.say("kept", "now here") == "heard 3: keep | done keeping | now here"

            def hang() -> None:
                with contextlib.suppress(httpx.HTTPError):  # its worker dies: no answer
                    a.say("chat", "hang")

            turn = threading.Thread(target=hang, daemon=True)
            turn.start()
            assert counting.hanging.wait(30)  # the turn is in the model call on worker a
            a.proc.send_signal(signal.SIGKILL)
            a.proc.wait(10)
            counting.release.set()
            answer = b.say("chat", "five")  # waits for a's lease (1 s) to expire
            assert answer == "heard 5: one | remember Ada likes tea | three | four | five"
            assert b.history("chat")[-2:] == [("user", "five"), ("assistant", answer)]
            turn.join(10)
        finally:
            counting.release.set()
            a.stop()
            b.stop()


async def test_a_failed_consolidation_is_retried_once_by_whichever_worker_claims_it(
    pg_urls: tuple[str, str], tmp_path: Path
) -> None:
    url = pg_urls[0]
    session = [UserMessage("I am Ada."), AssistantMessage("Hello Ada.")]
    store = PostgresMemory(url, options=ConsolidationOptions(retry_delay=0))
    down = ScriptedModel([ModelError("provider down")] * 3, name="scripted:w")
    ok = await store.consolidate(
        tenant="default", role="scout", session_id="s1", messages=session, model=down
    )
    assert not ok and await store.pending.count() == 1
    await store.aclose()

    models, hosts = [], []
    for name in ("w1", "w2", "w3"):
        model = ScriptedModel([memorize_passage("Ada is the user")], name="scripted:w")
        settings = Settings(home=tmp_path / name, workspace=tmp_path, database_url=url)
        runtime = Runtime.create(settings, model=model)
        models.append(model)
        hosts.append(ConversationHost(runtime, EventHub()))
    await asyncio.gather(*(host.retry_consolidations() for host in hosts))
    assert sum(m.call_count for m in models) == 1  # claimed by one worker, skipped by others
    check = PostgresMemory(url)
    try:
        assert [p.content for p in await check.search("default", "scout", "Ada")] == [
            "Ada is the user"
        ]
        assert await check.pending.count() == 0
    finally:
        await check.aclose()
        for host in hosts:
            memory = host.runtime.memory
            assert isinstance(memory, PostgresMemory)
            await memory.aclose()


def memorize_passage(text: str) -> AssistantMessage:
    return call_tool("memorize", {"block_updates": [], "new_passages": [text]})


async def test_a_turn_whose_lease_was_taken_over_is_not_saved(
    pg_urls: tuple[str, str], tmp_path: Path
) -> None:
    url = pg_urls[0]
    model = HeldModel(["first answer", "late answer"])
    settings = Settings(home=tmp_path, workspace=tmp_path, database_url=url)
    host = ConversationHost(Runtime.create(settings, model=model), EventHub())
    memory = host.runtime.memory
    assert isinstance(memory, PostgresMemory)
    try:
        model.release.set()
        await host.send("taken", "one")
        model.release.clear()  # the second turn's model call waits until the lease is taken
        turn = asyncio.create_task(host.send("taken", "two"))
        while model.begun < 2:  # the second turn is in its model call
            await asyncio.sleep(0.01)
        async with memory.connection() as conn:  # as if this worker stalled past its lease
            await conn.execute(
                "UPDATE conversation_leases SET owner = 'other-worker', token = 'theirs' "
                "WHERE id = 'taken'"
            )
        model.release.set()
        with pytest.raises(ConversationHeld, match="taken over by another worker"):
            await turn
        stored = await memory.conversations.load("default", "taken")
        assert stored is not None
        assert [m.content for m in stored if m.role != "system"] == ["one", "first answer"]
        assert "taken" not in host.ids()
    finally:
        await host.close_all()
        await memory.aclose()


def ask(question: str) -> AssistantMessage:
    return call_tool("AskParent", {"question": question})


def going_with(messages: Sequence[Message], _tools: Sequence[ToolSpec]) -> str:
    """The model after its question: it goes on with the answer (the call's result)."""
    result = messages[-1]
    assert isinstance(result, ToolResultMessage), f"not an answered question: {result}"
    return f"going with {result.content}"


def asker(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str | AssistantMessage:
    """Asks ``which port?`` when sent ``set it up``; goes on with the answer when answered."""
    if messages[-1].role == "user" and messages[-1].content == "set it up":
        return ask("which port?")
    if messages[-1].role == "tool":
        return going_with(messages, tools)
    return f"heard {messages[-1].content}"


async def test_a_question_asked_with_leases_is_stored_and_answered_by_another_worker(
    pg_urls: tuple[str, str], tmp_path: Path
) -> None:
    url = pg_urls[0]
    hosts: list[ConversationHost] = []
    for name, script in (("a", [ask("which port?")]), ("b", [going_with])):
        model = ScriptedModel(script, name="scripted:q")
        settings = Settings(home=tmp_path / name, workspace=tmp_path, database_url=url)
        hosts.append(ConversationHost(Runtime.create(settings, model=model), EventHub()))
    a, b = hosts
    try:
        asked = await a.send("ask", "set it up")
        assert (asked.stop_reason, asked.content) == ("asking", "which port?")
        assert "ask" not in a.ids()  # freed for the other workers, as after every turn
        stored = await b.history("ask")
        assert stored is not None and question_in(stored) == "which port?"
        assert not any("cancelled before it finished" in m.content for m in stored)
        assert not any("interrupted" in m.content for m in stored)
        answered = await b.send("ask", "8080")
        assert (answered.stop_reason, answered.content) == ("final", "going with 8080")
        assert b.question("ask") is None
        history = await a.history("ask")
        assert history is not None and question_in(history) is None
        shown = [(m.role, m.content) for m in history if m.role != "system"]
        assert shown == [
            ("user", "set it up"),
            ("assistant", ""),
            ("tool", "8080"),
            ("assistant", "going with 8080"),
        ]
        call = history[2]
        assert isinstance(call, AssistantMessage) and call.tool_calls[0].name == "AskParent"
        assert isinstance(history[3], ToolResultMessage)
        assert history[3].tool_call_id == call.tool_calls[0].id
    finally:
        for host in hosts:
            await host.close_all()
            memory = host.runtime.memory
            assert isinstance(memory, PostgresMemory)
            await memory.aclose()


def test_a_question_asked_on_one_worker_is_answered_on_the_other(
    pg_urls: tuple[str, str], tmp_path: Path
) -> None:
    pg_url = pg_urls[0]
    with LoopbackOpenAIServer(ScriptedModel(responder=asker), record=False) as provider:
        a = Worker(tmp_path / "a", provider, pg_url)
        b = Worker(tmp_path / "b", provider, pg_url)
        try:
            url = "/v1/conversations/port/messages"
            asked = a.client.post(url, json={"content": "set it up"}).json()
            assert (asked["stop_reason"], asked["content"]) == ("asking", "which port?")
            for worker in (a, b):
                shown = worker.client.get("/v1/conversations/port").json()
                assert shown["question"] == "which port?"
                assert not any("cancelled" in m["content"] for m in shown["messages"])
            answered = b.client.post(url, json={"content": "8080"}).json()
            assert (answered["stop_reason"], answered["content"]) == ("final", "going with 8080")
            assert a.client.get("/v1/conversations/port").json()["question"] is None
            assert a.history("port") == [
                ("user", "set it up"),
                ("assistant", ""),
                ("tool", "8080"),
                ("assistant", "going with 8080"),
            ]
            assert a.say("port", "thanks") == "heard thanks"  # the next turn: anywhere
        finally:
            a.stop()
            b.stop()


async def test_a_question_pending_when_a_lone_worker_stops_is_answered_after_the_restart(
    tmp_path: Path,
) -> None:
    """No shared store (SQLite): the question stays in memory while the worker runs, and is
    stored, not closed as interrupted, when the service stops."""
    hosts: list[ConversationHost] = []
    for script in ([ask("which port?")], [going_with]):
        model = ScriptedModel(script, name="scripted:q")
        settings = Settings(home=tmp_path / "home", workspace=tmp_path)
        hosts.append(ConversationHost(Runtime.create(settings, model=model), EventHub()))
    first, again = hosts
    try:
        asked = await first.send("q", "set it up")
        assert asked.stop_reason == "asking" and first.question("q") == "which port?"
        await first.close_all()
        stored = await again.history("q")
        assert stored is not None and question_in(stored) == "which port?"
        answered = await again.send("q", "8080")
        assert (answered.stop_reason, answered.content) == ("final", "going with 8080")
        history = await again.history("q")
        assert history is not None
        assert [m.role for m in history] == ["system", "user", "assistant", "tool", "assistant"]
    finally:
        await again.close_all()
