"""The model picked when none is configured, per API key in the environment: a current model
of the catalogue, Gemini when only a Google key is set."""

from __future__ import annotations

from pathlib import Path

import pytest

from retinue.config import Settings
from retinue.llm.profiles import CATALOGUE
from retinue.runtime import choose_model
from retinue.telemetry.prices import price_of

KEYS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")


@pytest.fixture
def settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Settings:
    for name in (*KEYS, "RETINUE_MODEL"):
        monkeypatch.delenv(name, raising=False)
    return Settings.load(home=tmp_path, workspace=tmp_path)


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("OPENAI_API_KEY", "openai:gpt-5.6-terra"),
        ("ANTHROPIC_API_KEY", "anthropic:claude-sonnet-5-5"),
        ("GEMINI_API_KEY", "gemini:gemini-3.1-pro-preview"),
        ("GOOGLE_API_KEY", "gemini:gemini-3.1-pro-preview"),
    ],
)
def test_one_key_picks_a_current_model_of_its_provider(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, key: str, expected: str
) -> None:
    monkeypatch.setenv(key, "k-test")
    model, notice = choose_model(settings)
    assert model == expected
    assert notice == f"Using {expected} ({key} is set)."
    assert model.partition(":")[2] in CATALOGUE and price_of(model) is not None


def test_anthropic_wins_over_a_google_key_and_openai_over_both(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOOGLE_API_KEY", "k-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k-test")
    assert choose_model(settings)[0] == "anthropic:claude-sonnet-5-5"
    monkeypatch.setenv("OPENAI_API_KEY", "k-test")
    assert choose_model(settings)[0].startswith("openai:")


def test_an_empty_key_counts_as_unset(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "")
    monkeypatch.setattr("retinue.llm._gguf.installed", lambda model: True)
    assert choose_model(settings)[0].startswith("local:")


def test_a_configured_model_is_kept_whatever_keys_are_set(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "k-test")
    monkeypatch.setenv("RETINUE_MODEL", "anthropic:claude-opus-5-5")
    settings = Settings.load(home=tmp_path, workspace=tmp_path)
    assert choose_model(settings) == ("anthropic:claude-opus-5-5", None)
