"""With the whole real-world role corpus installed in ``~/.claude/agents`` (645 files, 562
distinct roles) and the skills corpus in ``~/.claude/skills`` (26 skills), the main agent's
system prompt stays under 2,500 tokens, and under 1,000 with the small-model prompt: past their
budgets the roles and skills sections list names only; the parent finds roles with
``FindRole`` and loads skills with ``Skill``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from retinue.config import Settings
from retinue.llm.tokens import estimate_text_tokens
from retinue.runtime import LOCAL_DEFAULT, Runtime
from retinue.testing import ScriptedModel

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "claude-agents-corpus"
SKILLS = Path(__file__).resolve().parents[3] / "shared" / "skills-corpus"

pytestmark = pytest.mark.skipif(
    not CORPUS.is_dir() or not SKILLS.is_dir(), reason=f"corpora not found at {CORPUS.parent}"
)


@pytest.mark.parametrize("model", ["scripted:big", LOCAL_DEFAULT])  # full and small-model prompt
async def test_the_main_prompt_with_both_corpora_installed_stays_within_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: str
) -> None:
    user_home = tmp_path / "me"
    shutil.copytree(CORPUS, user_home / ".claude" / "agents")
    shutil.copytree(SKILLS, user_home / ".claude" / "skills")
    monkeypatch.setenv("HOME", str(user_home))
    workspace = tmp_path / "ws"
    workspace.mkdir()
    settings = Settings.load(home=tmp_path / "retinue-home", workspace=workspace)
    runtime = Runtime.create(settings, model=ScriptedModel([], name=model), with_memory=False)
    assert len(runtime.catalog.roles) == 562  # the packaged examples' names are taken
    assert len(runtime.skills.skills) == 26
    conversation = runtime.conversation()
    prompt = await conversation.system_prompt()
    tokens = estimate_text_tokens(prompt)
    assert tokens < (1000 if conversation.small_model_prompt else 2500), tokens
    assert "brainstorming" in prompt and "Skill(name)" in prompt
    if not conversation.small_model_prompt:  # the short prompt names 20 roles and counts the others
        assert "FindRole" in prompt
