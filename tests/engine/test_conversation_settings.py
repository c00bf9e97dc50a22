"""A conversation's settings changed between turns take effect at the next turn: its
``stream`` and ``keep_sessions``, and the runtime's event sink replaced after the
conversation was made (as ``retinue chat`` and the HTTP service do)."""

from __future__ import annotations

from pathlib import Path

from retinue.config import Settings
from retinue.events import RUN_FINISHED, TEXT_DELTA, Event
from retinue.runtime import Runtime
from retinue.subagents import Role
from retinue.testing import ScriptedModel, call_tool

HELPER = Role(name="helper", description="Keeps numbers", prompt="You keep numbers.", tools=())
OPEN = call_tool("SubAgent", {"task": "Keep 42.", "role": "helper", "interactive": True})


def _runtime(tmp_path: Path, model: ScriptedModel) -> Runtime:
    settings = Settings.load(workspace=tmp_path, home=tmp_path / "home")
    return Runtime.create(settings, model=model, with_memory=False, roles=[HELPER])


def _kinds(events: list[Event]) -> list[str]:
    return [e.kind for e in events if e.agent_id == "main"]


async def test_stream_and_the_event_sink_changed_between_turns_take_effect(
    tmp_path: Path,
) -> None:
    runtime = _runtime(tmp_path, ScriptedModel(["one", "two", "three"]))
    conversation = runtime.conversation()
    try:
        assert (await conversation.send("a")).content == "one"  # no sink yet: nothing seen
        first: list[Event] = []
        runtime.events = first.append  # a sink set after the conversation was made
        conversation.stream = True
        assert (await conversation.send("b")).content == "two"
        assert [e.data["text"] for e in first if e.kind == TEXT_DELTA] == ["two"]
        assert _kinds(first)[-1] == RUN_FINISHED
        seen = len(first)
        second: list[Event] = []
        runtime.events = second.append  # replaced again: the new sink hears the next turn
        conversation.stream = False
        assert (await conversation.send("c")).content == "three"
        assert len(first) == seen
        assert RUN_FINISHED in _kinds(second) and TEXT_DELTA not in _kinds(second)
    finally:
        await conversation.close()


async def test_keep_sessions_changed_between_turns_takes_effect(tmp_path: Path) -> None:
    model = ScriptedModel([OPEN, "Noted.", "Asked.", OPEN, "Noted again.", "Asked again."])
    runtime = _runtime(tmp_path, model)
    conversation = runtime.conversation()
    try:
        await conversation.send("Give the helper 42.")
        assert runtime.manager.sessions() == []  # ended with the turn (keep_sessions off)
        conversation.keep_sessions = True
        await conversation.send("Again.")
        assert [s.id for s in runtime.manager.sessions()] == ["main/helper"]  # kept
        model.assert_done()
    finally:
        await conversation.close()
    assert runtime.manager.sessions() == []
