"""Context budgets per model family, overrides, and the compressor's use of them."""

from __future__ import annotations

import pytest

from retinue.engine.compress import AutoCompressor
from retinue.errors import ConfigError
from retinue.llm.profiles import DEFAULT_PROFILE, ModelProfile, profile_for
from retinue.testing import ScriptedModel


@pytest.mark.parametrize(
    ("name", "window"),
    [
        ("openai:gpt-4o-mini", 128_000),
        ("openai:gpt-4.1-nano", 1_047_576),
        ("openai:gpt-5-mini", 400_000),
        ("openai:o3-mini", 200_000),
        ("openai:o1-mini", 128_000),
        ("openai:gpt-4", 8_192),
        ("openai:gpt-4-turbo", 128_000),
        ("anthropic:claude-sonnet-4-5", 200_000),
        ("anthropic:some-future-model", 200_000),
        ("openai:deepseek-chat", 128_000),
        ("openai:qwen2.5:7b", 32_768),
        ("openai:llama3.1:8b", 131_072),
        ("openai:llama2", 8_192),
        ("local:qwen2.5-0.5b-instruct", 8_192),
        ("scripted:model", 32_768),
        ("openai:something-unknown", DEFAULT_PROFILE.context_window),
        ("gpt-4o", 128_000),
    ],
)
def test_known_families(name: str, window: int) -> None:
    profile = profile_for(name)
    assert profile.context_window == window
    assert 0 < profile.input_budget < window


def test_overrides_by_full_name_bare_name_and_longest_prefix() -> None:
    small, smaller = ModelProfile(4_096, 512), ModelProfile(2_048, 256)
    overrides = {"openai:qwen": small, "openai:qwen2.5": smaller, "llama3": small}
    assert profile_for("openai:qwen2.5:7b", overrides) == smaller
    assert profile_for("openai:qwen3:8b", overrides) == small
    assert profile_for("openai:llama3:8b", overrides) == small
    assert profile_for("local:anything", {"local:anything": smaller}) == smaller
    assert profile_for("openai:gpt-4o", overrides).context_window == 128_000


def test_bad_profiles_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="output_reserve"):
        ModelProfile(1_000, 1_000)
    with pytest.raises(ConfigError, match="context_window"):
        ModelProfile(0, 0)
    with pytest.raises(ConfigError, match="threshold"):
        AutoCompressor(threshold=1.5)


def test_compressor_overrides_win_over_the_profile() -> None:
    model = ScriptedModel(name="openai:gpt-4o")
    assert AutoCompressor().budget(model) == 128_000 - 16_384
    assert AutoCompressor(context_window=10_000).profile(model) == ModelProfile(10_000, 2_500)
    both = AutoCompressor(context_window=10_000, output_reserve=1_000)
    assert both.budget(model) == 9_000
    named = AutoCompressor(profiles={"openai:gpt-4o": ModelProfile(50_000, 5_000)})
    assert named.budget(model) == 45_000
