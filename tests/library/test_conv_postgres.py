"""``Agent(store="postgresql://...")``: a conversation saved by one process in PostgreSQL is
resumed by another with the current instructions, and an approval pending when the first
process died is answered after the resume. Skips without PostgreSQL."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory.backends import empty_database, start_pg_server
from retinue import Agent, SystemMessage, UserMessage
from retinue.testing import ScriptedModel


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    server, url = start_pg_server()
    yield url
    server.stop()


SAVES = """
    import asyncio, os, sys
    from retinue import Agent
    from retinue.testing import ScriptedModel, call_tool

    def approver(request):
        print("asked:", request.tool, flush=True)
        os._exit(3)  # the process dies while the approval waits

    async def main():
        write = call_tool("Write", {"file_path": "note.txt", "content": "pg"})
        agent = Agent(ScriptedModel(["Hello, Ada.", write]), instructions="You are OLD.",
                      memory=False, workspace=sys.argv[2], store=sys.argv[1],
                      approver=approver)
        conversation = agent.conversation("pg-chat")
        print((await conversation.send("I am Ada.")).content, flush=True)
        await conversation.send("Write a note.")

    asyncio.run(main())
"""


async def test_a_conversation_in_postgres_resumes_in_another_process(
    pg_url: str, tmp_path: Path
) -> None:
    await empty_database(pg_url)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RETINUE_"))}
    env |= {"RETINUE_HOME": str(tmp_path / "home"), "RETINUE_BLOCK_REAL_MODELS": "1"}
    died = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-c", textwrap.dedent(SAVES), pg_url, str(tmp_path)],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert died.returncode == 3, died.stderr
    assert died.stdout.split("\n")[:2] == ["Hello, Ada.", "asked: Write"]

    model = ScriptedModel(["Noted, Ada."])
    with Agent(model, instructions="You are NEW.", memory=False, workspace=tmp_path,
               store=pg_url, approver=lambda _: False) as agent:  # fmt: skip
        conversation = agent.conversation("pg-chat", create=False)
        [request] = await conversation.approvals()
        out = await conversation.approve(request.id, True)
        assert out is not None and out.content == "Noted, Ada."
        assert await agent.conversation("pg-chat").approvals() == []
    assert (tmp_path / "note.txt").read_text() == "pg"
    sent = model.calls[0].messages
    assert isinstance(sent[0], SystemMessage) and sent[0].content.startswith("You are NEW.")
    assert [m.content for m in sent if isinstance(m, UserMessage)] == ["I am Ada.", "Write a note."]
