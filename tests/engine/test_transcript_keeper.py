"""The Lifecycle ``transcript`` hook at the level of the session primitive: a closed session
leaves one transcript with how it ended; a store that fails never fails the close."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from retinue.engine import RunConfig
from retinue.engine.session import FAILED_NOTE, INTERRUPTED_NOTE, Lifecycle, Session
from retinue.engine.transcripts import TranscriptKeeper, outcome_of
from retinue.memory import open_memory
from retinue.messages import AssistantMessage, Message, UserMessage
from retinue.testing import ScriptedModel
from retinue.tools import ToolContext, ToolRegistry

pytestmark = pytest.mark.timeout(60)  # a hang bound, not a timing


def session_with(tmp_path: Path, model: ScriptedModel, keeper: TranscriptKeeper) -> Session:
    ctx = ToolContext("main/helper", tmp_path, tmp_path, role="helper", parent_id="main",
                      tenant="acme", depth=1)  # fmt: skip
    config = RunConfig(model, [], ToolRegistry([]), ctx)
    return Session("main/helper", config, Lifecycle(transcript=keeper.keep))


async def test_a_closed_session_leaves_its_transcript_once(tmp_path: Path) -> None:
    store = open_memory(tmp_path / "home")
    try:
        session = session_with(tmp_path, ScriptedModel(["hello there"]), TranscriptKeeper(
            store.transcripts, 30))  # fmt: skip
        await session.send("hi")
        await session.close()
        await session.close()  # idempotent: still one transcript
        kept = await store.transcripts.ended("acme")
        assert len(kept) == 1
        s = kept[0]
        assert (s.session_id, s.parent_id, s.role, s.kind, s.depth) == (
            "main/helper", "main", "helper", "one-shot", 1)  # fmt: skip
        assert (s.turns, s.outcome, s.messages, s.requests) == (1, "done", 2, 1)
        assert s.started_at <= s.ended_at
        assert await store.transcripts.ended("default") == []
    finally:
        store.close()


async def test_a_store_that_fails_never_fails_the_close(tmp_path: Path) -> None:
    store = open_memory(tmp_path / "home")
    store.close()  # every write now raises
    session = session_with(tmp_path, ScriptedModel(["hello"]), TranscriptKeeper(
        store.transcripts, 30))  # fmt: skip
    await session.send("hi")
    assert await asyncio.wait_for(session.close(), 30) == "none"
    assert session.state == "closed"


@pytest.mark.parametrize(
    ("history", "asking", "outcome"),
    [
        ([], False, "empty"),
        ([UserMessage("x"), AssistantMessage("ok")], False, "done"),
        ([UserMessage("x"), AssistantMessage(INTERRUPTED_NOTE)], False, "interrupted"),
        ([UserMessage("x"), AssistantMessage(FAILED_NOTE.format(error="boom"))], False, "failed"),
        ([UserMessage("x")], True, "asking"),
    ],
)
def test_how_a_session_ended_is_read_from_its_history(
    history: list[Message], asking: bool, outcome: str
) -> None:
    assert outcome_of(history, asking) == outcome
