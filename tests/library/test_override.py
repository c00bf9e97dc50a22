"""A test of a program's own agent: ``agent.override(model=...)`` swaps the model at any time,
for the main agent and the sub-agents that inherit it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from retinue import Agent, ModelError, Role
from retinue.testing import BLOCK_REAL_MODELS, ScriptedModel, call_tool

HELPER = Role(name="helper", description="Helps", prompt="You help.", tools=())


def test_override_takes_effect_before_and_after_a_first_run(tmp_path: Path) -> None:
    first, second, third = ScriptedModel(["one"]), ScriptedModel(["two"]), ScriptedModel(["3"])
    with Agent(first, workspace=tmp_path, builtin_tools=False, memory=False) as agent:
        assert agent.run_sync("a").content == "one"  # the runtime is built on ``first``
        with agent.override(model=second):
            assert agent.run_sync("b").content == "two"
            with agent.override(model=third):
                assert agent.run_sync("c").content == "3"
        first.add("one again")
        assert agent.run_sync("d").content == "one again"  # back to the agent's own
        agent.model = second.add("two again")  # so does a plain assignment
        assert agent.run_sync("e").content == "two again"
    for model in (first, second, third):
        model.assert_done()
    assert [c.messages[-1].content for c in second.calls] == ["b", "e"]


def test_the_sub_agents_that_inherit_the_model_get_the_override(tmp_path: Path) -> None:
    real = ScriptedModel(["warmed up"])
    fake = ScriptedModel([call_tool("SubAgent", {"task": "t", "role": "helper"}), "sub", "top"])
    with Agent(real, workspace=tmp_path, builtin_tools=False, memory=False, roles=[HELPER]) as a:
        assert a.run_sync("warm up").content == "warmed up"
        with a.override(model=fake):
            assert a.run_sync("go").content == "top"
    fake.assert_done()
    real.assert_done()
    assert real.call_count == 1
    assert fake.calls[1].messages[-1].content == "t"  # the sub-agent ran on the override


def test_real_models_are_blocked_in_tests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert os.environ.get(BLOCK_REAL_MODELS) == "1"  # tests/conftest.py sets it
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-real")
    agent = Agent(ScriptedModel(), workspace=tmp_path, builtin_tools=False, memory=False)
    with (
        agent,
        agent.override(model="openai:gpt-4o-mini"),
        pytest.raises(ModelError, match="real model requests are blocked"),
    ):
        agent.run_sync("hello")
