"""With the whole real-world corpus installed in ``~/.claude/agents`` (645 files, 562 distinct
roles), the main agent's system prompt stays under 3k tokens: past the budget it lists role
names only and the parent finds the rest with ``FindRole``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from retinue.config import Settings
from retinue.llm.tokens import estimate_text_tokens
from retinue.runtime import LOCAL_DEFAULT, Runtime
from retinue.testing import ScriptedModel

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "claude-agents-corpus"

pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason=f"corpus not found at {CORPUS}")


@pytest.mark.parametrize("model", ["scripted:big", LOCAL_DEFAULT])  # full and compact prompt
async def test_the_main_prompt_with_the_whole_corpus_installed_is_under_3k_tokens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: str
) -> None:
    user_home = tmp_path / "me"
    shutil.copytree(CORPUS, user_home / ".claude" / "agents")
    monkeypatch.setenv("HOME", str(user_home))
    workspace = tmp_path / "ws"
    workspace.mkdir()
    settings = Settings.load(home=tmp_path / "retinue-home", workspace=workspace)
    runtime = Runtime.create(settings, model=ScriptedModel([], name=model), with_memory=False)
    assert len(runtime.catalog.roles) == 562  # the packaged examples' names are taken
    conversation = runtime.conversation()
    prompt = await conversation.system_prompt()
    tokens = estimate_text_tokens(prompt)
    assert tokens < 3000, tokens
    if not conversation.compact:  # the compact prompt names 20 roles and counts the others
        assert "FindRole" in prompt
