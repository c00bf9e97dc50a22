"""Shared memory over HTTP against a real server on 127.0.0.1 with the scripted model.

The roles of tests/cli/test_memory_shared.py: ``writer`` may write the shared block
``team-notes``, ``reader`` only reads it. Conversations of one tenant, sent at once, each
start five writer sessions in parallel: every note is kept; a reader started afterwards sees
them all in its prompt (and says so in the answer), its own write is refused with a clear
message, and another tenant's reader sees only its tenant's notes. Once on the SQLite store,
once on PostgreSQL (skipped without it).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from serverkit import ServerThread

from cli.test_memory_shared import READER, WRITER, WRITERS, team
from memory.backends import start_pg_server
from retinue.config import Settings
from retinue.llm.base import ToolSpec
from retinue.messages import AssistantMessage, Message
from retinue.runtime import Runtime
from retinue.testing import ScriptedModel

pytestmark = pytest.mark.timeout(90)

NOTE = re.compile(r"\b[a-z]\d note \d\b")


def answering(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> AssistantMessage:
    """:func:`team`, except that the reader says which notes its prompt showed, what its
    write got back, and the main agent passes that on as its answer."""
    system = messages[0].content if messages[0].role == "system" else ""
    last = messages[-1]
    if last.role == "tool" and not any(t.name == "memorize" for t in tools):
        if system.startswith("You read the team's notes"):
            seen = sorted(set(NOTE.findall(system)))
            return AssistantMessage(f"saw {len(seen)}: {', '.join(seen)} | {last.content}")
        if not system.startswith("You keep the team's notes") and "saw " in last.content:
            return AssistantMessage(last.content)
    return team(messages, tools)


def send(client: httpx.Client, conversation: str, text: str) -> str:
    sent = client.post(f"/v1/conversations/{conversation}/messages", json={"content": text})
    assert sent.status_code == 200, sent.text
    return sent.json()["content"]


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest) -> Iterator[str | None]:
    """None (the SQLite store), or a PostgreSQL database (skipped without PostgreSQL)."""
    if request.param == "sqlite":
        yield None
        return
    server, url = start_pg_server()
    try:
        yield url
    finally:
        server.stop()


@pytest.fixture
def server(tmp_path: Path, database_url: str | None) -> Iterator[ServerThread]:
    agents = tmp_path / ".retinue" / "agents"
    agents.mkdir(parents=True)
    (agents / "writer.md").write_text(WRITER)
    (agents / "reader.md").write_text(READER)
    settings = Settings.load(home=tmp_path / "home", workspace=tmp_path)
    settings.database_url = database_url
    model = ScriptedModel(responder=answering)
    runtime = Runtime.create(settings, model=model, with_memory=True)
    kind = "PostgresMemory" if database_url else "SQLiteMemory"
    assert type(runtime.memory).__name__ == kind
    started = ServerThread(runtime).start()
    yield started
    started.stop()


def test_roles_share_a_block_over_http_per_tenant_and_no_write_is_lost(
    server: ServerThread,
) -> None:
    alice, bob = (server.client(token=server.issue(n)) for n in ("alice", "bob"))
    with alice, bob, ThreadPoolExecutor(4) as pool:
        tags = ["a0", "a1", "a2"]
        list(pool.map(lambda t: send(alice, f"c-{t}", f"tag {t}"), tags))
        last = send(alice, "c-a3", "tag a3")  # its reader starts after every write above
        bob_says = send(bob, "c-b0", "tag b0")

    notes = sorted(f"{t} note {i}" for t in [*tags, "a3"] for i in range(WRITERS))
    assert last.startswith(f"saw {len(notes)}: {', '.join(notes)} | ")
    assert "Error: block 'team-notes' is shared with role 'reader' read-only" in last
    assert "it cannot be changed here" in last
    bob_notes = ", ".join(f"b0 note {i}" for i in range(WRITERS))
    assert bob_says.startswith(f"saw {WRITERS}: {bob_notes} | ")  # its tenant's only
