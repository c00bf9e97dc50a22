"""The model catalogue (:mod:`retinue.llm.profiles`): windows, output limits and capability
flags of the current models, a dated id read as its name, and the adapters' decisions taken
from it."""

from __future__ import annotations

import pytest

from retinue.errors import ConfigError
from retinue.llm.profiles import (
    ADAPTIVE,
    ALWAYS,
    BUDGET,
    CATALOGUE,
    DEFAULT_PROFILE,
    EFFORT,
    LEVEL,
    NO_THINKING,
    ModelProfile,
    profile_for,
)
from retinue.telemetry.prices import price_of

CURRENT = [
    ("anthropic:claude-fable-5", 1_000_000, 128_000, ALWAYS),
    ("anthropic:claude-fable-5-1", 1_000_000, 128_000, ALWAYS),
    ("anthropic:claude-fable-5-2", 1_000_000, 128_000, ALWAYS),
    ("anthropic:claude-opus-5-5", 1_000_000, 128_000, ALWAYS),
    ("anthropic:claude-sonnet-5-5", 1_000_000, 128_000, ADAPTIVE),
    ("anthropic:claude-haiku-5-5", 1_000_000, 128_000, ADAPTIVE),
    ("anthropic:claude-haiku-4-5", 200_000, 64_000, BUDGET),
    ("openai:gpt-5.2", 400_000, 128_000, EFFORT),
    ("openai:gpt-5.6-terra", 1_050_000, 128_000, EFFORT),
    ("openai:gpt-5.6-sol", 1_050_000, 128_000, EFFORT),
    ("openai:gpt-5.6-luna", 1_050_000, 128_000, EFFORT),
    ("openai:gpt-6-sol", 1_050_000, 128_000, EFFORT),
    ("openai:gpt-6-astra", 1_050_000, 128_000, EFFORT),
    ("gemini:gemini-3.1-pro-preview", 1_048_576, 65_536, LEVEL),
    ("gemini:gemini-3.8-flash", 1_048_576, 65_536, LEVEL),
    ("gemini:gemini-3-flash-preview", 1_048_576, 65_536, LEVEL),
    ("gemini:gemini-2.5-pro", 1_048_576, 65_536, BUDGET),
]


@pytest.mark.parametrize(("name", "window", "out", "thinking"), CURRENT)
def test_a_current_model_has_its_window_output_limit_thinking_and_a_price(
    name: str, window: int, out: int, thinking: str
) -> None:
    p = profile_for(name)
    assert (p.context_window, p.max_output, p.thinking) == (window, out, thinking)
    assert p.reasoning and p.vision and p.structured_output
    assert p.input_budget == window - out
    assert price_of(name) is not None


def test_gpt_5_4_and_5_5_have_a_1m_window_and_a_price() -> None:
    for name in ("openai:gpt-5.4", "openai:gpt-5.5"):
        p = profile_for(name)
        assert p.context_window == 1_000_000 and p.thinking == EFFORT
        assert price_of(name) is not None


def test_a_dated_id_is_its_name_and_a_bare_name_needs_no_provider() -> None:
    assert profile_for("anthropic:claude-opus-5-5-20260922") is CATALOGUE["claude-opus-5-5"]
    assert profile_for("claude-fable-5-2") is CATALOGUE["claude-fable-5-2"]
    assert profile_for("gemini:models/gemini-3-pro-preview") is CATALOGUE["gemini-3-pro-preview"]


def test_a_later_model_of_a_known_family_falls_back_to_its_family() -> None:
    assert profile_for("anthropic:claude-fable-5-3").thinking == ALWAYS
    assert profile_for("anthropic:claude-sonnet-6").thinking == ADAPTIVE
    assert profile_for("anthropic:claude-opus-4-6").thinking == ADAPTIVE
    assert profile_for("anthropic:claude-sonnet-4-5").thinking == BUDGET
    assert profile_for("anthropic:claude-3-5-haiku").thinking == NO_THINKING
    assert profile_for("openai:gpt-7-nova").context_window == 1_050_000
    assert profile_for("openai:o3").thinking == EFFORT
    assert profile_for("gemini:gemini-4-flash").thinking == LEVEL


def test_models_that_do_not_think_say_so() -> None:
    for name in ("openai:gpt-4o", "gemini:gemini-2.0-flash", "local:qwen2.5-coder-0.5b"):
        assert not profile_for(name).reasoning, name
    assert profile_for("openai:some-unknown-model") == DEFAULT_PROFILE
    assert price_of("openai:some-unknown-model") is None


def test_an_override_still_wins_over_the_catalogue() -> None:
    mine = ModelProfile(64_000, 8_000)
    assert profile_for("anthropic:claude-opus-5-5", {"claude-opus": mine}) is mine


def test_an_unknown_thinking_kind_is_refused() -> None:
    with pytest.raises(ConfigError, match="thinking must be one of"):
        ModelProfile(1_000, 100, thinking="sometimes")


def test_the_adapters_decide_thinking_from_the_catalogue() -> None:
    from retinue.llm._anthropic_wire import always_thinks, thinking_config
    from retinue.llm.gemini import settings_config
    from retinue.llm.openai_responses import settings_fields
    from retinue.llm.settings import ModelSettings

    high = ModelSettings(effort="high", temperature=0.2)
    for bare, p in CATALOGUE.items():
        if bare.startswith("claude-"):
            assert (thinking_config(bare) is not None) == (p.thinking in (ADAPTIVE, ALWAYS))
            assert always_thinks(bare) == (p.thinking == ALWAYS), bare
        elif bare.startswith("gpt-"):
            fields, dropped = settings_fields(bare, high)
            assert fields["reasoning"] == {"effort": "high"} and "temperature" not in fields
            assert any(d.startswith("temperature") for d in dropped)
        else:
            fields, _ = settings_config(bare, high)
            key = "thinking_level" if p.thinking == LEVEL else "thinking_budget"
            assert list(fields["thinking_config"]) == [key], bare
    assert always_thinks("claude-opus-5-5-20260922") and not always_thinks("claude-sonnet-5-5")
    assert thinking_config("claude-haiku-4-5") is None
    fields, dropped = settings_fields("gpt-4o", high)
    assert "reasoning" not in fields and fields["temperature"] == 0.2
    assert settings_config("gemini-2.0-flash", high)[1] == ["effort (the model does not think)"]
