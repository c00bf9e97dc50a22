"""``Agent(store="postgresql://...")``: a conversation saved in PostgreSQL by a process that
died waiting for an approval is resumed by another, with the current instructions, and the
approval is answered there. Skips without PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_saved_conversation import DIES_WAITING, in_another_process

from memory.backends import empty_database, start_pg_server
from retinue import Agent, SystemMessage, ToolResultMessage
from retinue.testing import ScriptedModel


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    server, url = start_pg_server()
    yield url
    server.stop()


async def test_a_conversation_in_postgres_resumes_in_another_process(
    pg_url: str, tmp_path: Path
) -> None:
    await empty_database(pg_url)
    (tmp_path / "ws").mkdir()
    died = await asyncio.to_thread(in_another_process, tmp_path, DIES_WAITING, pg_url)
    assert died.returncode == 3, died.stderr
    assert died.stdout.strip() == "asked: Write"
    assert not (tmp_path / "home" / "memory.db").exists()  # saved in PostgreSQL, not SQLite

    model = ScriptedModel(["Deployed."])
    with Agent(model, instructions="Deploy carefully.", memory=False, workspace=tmp_path / "ws",
               store=pg_url, approver=lambda _: False) as agent:  # fmt: skip
        conversation = agent.conversation("job-7", create=False)
        [request] = await conversation.approvals()
        out = await conversation.approve(request.id, True)
        assert out is not None and out.content == "Deployed."
        assert await agent.conversation("job-7").approvals() == []
    assert (tmp_path / "ws" / "deploy.txt").read_text() == "v2"
    sent = model.calls[0].messages
    assert isinstance(sent[0], SystemMessage) and sent[0].content.startswith("Deploy carefully.")
    [result] = [m for m in sent if isinstance(m, ToolResultMessage)]
    assert not result.is_error
