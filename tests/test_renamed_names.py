"""Renamed names (docs/glossary.md) keep working for one release: each old name gives the new
object and warns with a DeprecationWarning that names its replacement; the wire keeps the
old key of a renamed event field."""

from __future__ import annotations

import importlib
import warnings
from pathlib import Path

import pytest

from retinue import events
from retinue.events import CONSOLIDATED, SESSION, Consolidated, Event, SessionChanged, make_event
from retinue.llm.profiles import ModelProfile, profile_for


@pytest.mark.parametrize(
    ("module", "old", "new_module", "new"),
    [
        ("retinue.events", "ModelStarted", "retinue.events", "ModelCallStarted"),
        ("retinue.events", "ModelCalled", "retinue.events", "ModelCallFinished"),
        ("retinue.events", "SessionEvent", "retinue.events", "SessionChanged"),
        ("retinue.subagents", "conversation_id", "retinue.subagents", "agent_id"),
        ("retinue.subagents.registry", "conversation_id", "retinue.subagents.registry", "agent_id"),
        (
            "retinue.engine.compact",
            "COMPACT_OMITS",
            "retinue.engine.small_model_prompt",
            "SMALL_MODEL_OMITS",
        ),
        (
            "retinue.engine.compact",
            "compact_main_prompt",
            "retinue.engine.small_model_prompt",
            "small_model_main_prompt",
        ),
    ],
)
def test_an_old_name_is_the_new_object_and_warns_naming_it(
    module: str, old: str, new_module: str, new: str
) -> None:
    with pytest.warns(DeprecationWarning) as caught:
        value = getattr(importlib.import_module(module), old)
    assert value is getattr(importlib.import_module(new_module), new)
    [warning] = caught
    assert f"{module}.{old} is deprecated: use {new_module}.{new}" in str(warning.message)


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    unknown = "Nope"
    for module in ("retinue.events", "retinue.subagents", "retinue.engine.compact"):
        with pytest.raises(AttributeError, match=unknown):
            getattr(importlib.import_module(module), unknown)


def test_the_old_names_match_the_same_events() -> None:
    with pytest.warns(DeprecationWarning):
        from retinue.events import SessionEvent  # pyright: ignore[reportDeprecated]
    event = make_event(SESSION, "main/a", {"action": "asking", "question": "Why?"})
    match event:
        case SessionEvent(action="asking", question=question):
            assert question == "Why?"
        case _:
            pytest.fail(f"not matched: {event!r}")


def test_a_session_event_says_its_id_as_agent_id_and_the_old_key_too() -> None:
    from retinue.subagents import agent_id

    sid = agent_id("main", "researcher", "paper-2")
    assert sid == "main/researcher:paper-2"
    new = make_event(SESSION, sid, {"action": "created", "parent_id": "main", "role": "r"})
    old = make_event(SESSION, sid, {"action": "created", "conversation_id": sid})  # old emitter
    for event in (new, old, SessionChanged(sid, action="paused", turns=2)):
        assert isinstance(event, SessionChanged) and event.agent_id == sid
        assert event.to_dict()["conversation_id"] == sid == event.data["conversation_id"]
        assert "conversation_id" not in event.extra
        with pytest.warns(DeprecationWarning, match="SessionChanged.conversation_id.*agent_id"):
            assert event.conversation_id == sid
    assert "conversation_id" not in Event("deployed", sid, {"where": "prod"}).to_dict()


def test_a_consolidated_event_says_its_session_as_agent_id_and_the_old_key_too() -> None:
    sid = "main/researcher"
    new = make_event(CONSOLIDATED, sid, {"role": "researcher", "ok": True})
    old = make_event(CONSOLIDATED, sid, {"role": "researcher", "session_id": sid})
    for event in (new, old, Consolidated(sid, role="researcher")):
        assert isinstance(event, Consolidated) and event.ok and event.agent_id == sid
        assert event.to_dict()["session_id"] == sid and "session_id" not in event.extra
        with pytest.warns(DeprecationWarning, match="Consolidated.session_id.*agent_id"):
            assert event.session_id == sid


def test_a_model_profile_says_small_model_prompt_and_reads_as_compact_too() -> None:
    small = profile_for("local:qwen2.5-coder-0.5b")
    assert small.small_model_prompt and not profile_for("openai:gpt-4o").small_model_prompt
    with pytest.warns(DeprecationWarning, match="ModelProfile.small_model_prompt"):
        assert small.compact is True
    with pytest.warns(DeprecationWarning):
        assert ModelProfile(8_192, 1_024).compact is False


def test_the_new_names_do_not_warn(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from retinue.engine.small_model_prompt import SMALL_MODEL_OMITS, small_model_main_prompt
        from retinue.events import ModelCallFinished, ModelCallStarted, SessionAction

        assert "TodoWrite" in SMALL_MODEL_OMITS and ModelCallStarted is not ModelCallFinished
        assert "created" in SessionAction.__args__  # pyright: ignore[reportAttributeAccessIssue]
        assert "The folder is empty." in small_model_main_prompt(tmp_path, [])
        assert events.EVENT_CLASSES  # the union still lists every class once
        assert len(set(events.EVENT_CLASSES)) == len(events.EVENT_CLASSES)


def test_the_small_model_tool_keywords_keep_their_old_names() -> None:
    """``render_tools(compact=)`` and ``LocalModel(compact_tools=)`` (and its attribute)
    still work, warn, and mean ``small_model`` / ``small_model_tools``."""
    from retinue.llm.base import ToolSpec
    from retinue.llm.local import render_tools

    spec = ToolSpec("Find", "Find things. Then say where they are.", {"type": "object"})
    with pytest.warns(DeprecationWarning, match=r"render_tools\(small_model=\)"):
        old = render_tools([spec], compact=True)
    assert old == render_tools([spec], small_model=True) != render_tools([spec])
    pytest.importorskip("llama_cpp", reason="LocalModel needs the local extra")
    from retinue.llm.local import LocalModel

    with pytest.warns(DeprecationWarning, match=r"LocalModel\(small_model_tools=\)"):
        model = LocalModel(compact_tools=False)
    assert model.small_model_tools is False
    with pytest.warns(DeprecationWarning, match="LocalModel.small_model_tools"):
        assert model.compact_tools is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert LocalModel(small_model_tools=False).small_model_tools is False
