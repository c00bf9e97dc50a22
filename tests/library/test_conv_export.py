"""A saved conversation exported as JSON and imported elsewhere goes on where it was, with the
importing agent's system prompt (one is put first even when the export has none); a corrupt
or foreign export, a bad id, or an unknown id asked for strictly is a one-line
``ConversationError`` with nothing stored or lost."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from retinue import (
    Agent,
    AssistantMessage,
    ConversationError,
    SystemMessage,
    UserMessage,
)
from retinue.testing import ScriptedModel


def agent_in(home: Path, model: ScriptedModel, instructions: str) -> Agent:
    home.mkdir(exist_ok=True)
    return Agent(model, instructions=instructions, builtin_tools=False, memory=False,
                 home=home, workspace=home)  # fmt: skip


async def test_an_export_imported_by_another_agent_goes_on_with_its_prompt(
    tmp_path: Path,
) -> None:
    with agent_in(tmp_path / "a", ScriptedModel(["Go to Lisbon."]), "You are A.") as a:
        trip = a.conversation("trip")
        await trip.send("Plan a trip.")
        text = json.dumps(await a.conversation("trip").export())  # read from the store
    model = ScriptedModel(["In May."])
    with agent_in(tmp_path / "b", model, "You are B.") as b:
        imported = await b.import_conversation(text, id="trip-b")
        assert imported.id == "trip-b"
        out = await imported.send("When?")
        assert out.content == "In May."
        again = await b.conversation("trip-b", create=False).load()  # saved after the turn
        assert [m.content for m in again.messages[1:]] == [
            "Plan a trip.", "Go to Lisbon.", "When?", "In May."
        ]  # fmt: skip
    assert model.calls[0].messages == (
        SystemMessage("You are B."),
        UserMessage("Plan a trip."),
        AssistantMessage("Go to Lisbon."),
        UserMessage("When?"),
    )


async def test_a_history_without_a_system_prompt_gets_the_current_one(tmp_path: Path) -> None:
    export = {
        "format": "retinue.conversation",
        "version": 1,
        "id": "bare",
        "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hey"}],
    }
    model = ScriptedModel(["Still here."])
    with agent_in(tmp_path, model, "You are kind.") as agent:
        conversation = await agent.import_conversation(export)
        await conversation.send("Still there?")
    assert model.calls[0].messages[0] == SystemMessage("You are kind.")
    assert [type(m) for m in model.calls[0].messages[1:]] == [
        UserMessage, AssistantMessage, UserMessage
    ]  # fmt: skip


GOOD: dict[str, Any] = {
    "format": "retinue.conversation",
    "version": 1,
    "id": "x",
    "messages": [{"role": "user", "content": "Hi"}],
}

BAD: list[tuple[str | dict[str, Any], str]] = [
    ("{not json", "not JSON"),
    ('{"messages": []}', "not a conversation export"),
    ('["retinue.conversation"]', "not a conversation export"),
    ({**GOOD, "version": 9}, "version 9 unknown"),
    ({**GOOD, "id": "../etc"}, "bad id"),
    ({**GOOD, "messages": "Hi"}, "no list of messages"),
    ({**GOOD, "messages": [{"role": "alien", "content": "x"}]}, "message 0 is bad"),
    ({**GOOD, "messages": [{"role": "user"}]}, "message 0 is bad"),
    ({**GOOD, "messages": [{"role": "user", "content": "a"}, 7]}, "message 1 is bad"),
    ("[" * 100_000 + "]" * 100_000, "not JSON"),
]


@pytest.mark.parametrize(("data", "says"), BAD)
async def test_a_bad_export_is_one_line_and_nothing_is_lost(
    tmp_path: Path, data: str | dict[str, Any], says: str
) -> None:
    with agent_in(tmp_path, ScriptedModel(["kept"]), "You are kept.") as agent:
        kept = agent.conversation("x")
        await kept.send("Keep me.")
        before = await kept.store.load(kept.tenant, "x")
        with pytest.raises(ConversationError, match=says) as caught:
            await agent.import_conversation(data, id="x", replace=True)
        assert "\n" not in str(caught.value)
        assert await kept.store.load(kept.tenant, "x") == before


async def test_an_import_over_a_saved_conversation_needs_replace(tmp_path: Path) -> None:
    with agent_in(tmp_path, ScriptedModel(["kept"]), "You are kept.") as agent:
        kept = agent.conversation("x")
        await kept.send("Keep me.")
        with pytest.raises(ConversationError, match="saved already"):
            await agent.import_conversation(GOOD)
        assert len(await kept.store.load(kept.tenant, "x") or []) == 3
        await agent.import_conversation(GOOD, replace=True)
        assert await kept.store.load(kept.tenant, "x") == [UserMessage("Hi")]


async def test_an_unknown_id_asked_for_strictly_is_an_error_and_stores_nothing(
    tmp_path: Path,
) -> None:
    with agent_in(tmp_path, ScriptedModel([]), "You are strict.") as agent:
        missing = agent.conversation("never-saved", create=False)
        with pytest.raises(ConversationError, match="no saved conversation 'never-saved'"):
            await missing.load()
        with pytest.raises(ConversationError, match="no saved conversation"):
            await missing.send("Hello?")
        assert await missing.store.summaries(missing.tenant) == []
        with pytest.raises(ConversationError, match="bad conversation id"):
            agent.conversation("a/b")
