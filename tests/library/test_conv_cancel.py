"""A turn cancelled while the approver waits leaves its approval pending in the store: the
same saved conversation (or any other process) lists it and answers it later, as after a
process that died. Nothing runs before the answer."""

from __future__ import annotations

import asyncio
from pathlib import Path

from retinue import Agent, ApprovalRequest
from retinue.testing import ScriptedModel, call_tool


async def test_a_cancelled_wait_keeps_the_approval_for_later(tmp_path: Path) -> None:
    asked = asyncio.Event()

    async def slow_person(request: ApprovalRequest) -> bool:
        asked.set()
        await asyncio.Event().wait()  # never answers
        return True

    write = call_tool("Write", {"file_path": "later.txt", "content": "yes"})
    model = ScriptedModel([write, "Written."])
    with Agent(model, memory=False, workspace=tmp_path, approver=slow_person) as agent:
        conversation = agent.conversation("later")
        turn = asyncio.create_task(conversation.send("Write it."))
        await asyncio.wait_for(asked.wait(), 30)
        turn.cancel()
        await asyncio.gather(turn, return_exceptions=True)
        [request] = await conversation.approvals()
        assert request.tool == "Write" and not (tmp_path / "later.txt").exists()
        [stored] = await agent.conversation("later").approvals()  # as another process sees it
        assert stored.id == request.id
        out = await conversation.approve(request.id, True)
        assert out is not None and out.content == "Written."
        assert await agent.conversation("later").approvals() == []
    assert (tmp_path / "later.txt").read_text() == "yes"
