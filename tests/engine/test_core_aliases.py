"""Names the core renamed keep working for one release: ``engine.run`` is ``run_turn``, and
``Conversation.compact`` reads ``small_model_prompt`` with a warning that names it."""

from __future__ import annotations

from pathlib import Path

import pytest

from retinue.config import Settings
from retinue.engine import run, run_turn
from retinue.runtime import Runtime
from retinue.testing import ScriptedModel


def test_run_is_run_turn() -> None:
    assert run is run_turn


def test_conversation_compact_is_a_deprecated_alias(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home", workspace=tmp_path)
    runtime = Runtime.create(settings, model=ScriptedModel(), with_memory=False)
    conversation = runtime.conversation()
    with pytest.warns(DeprecationWarning, match="Conversation.small_model_prompt"):
        assert conversation.compact is conversation.small_model_prompt
