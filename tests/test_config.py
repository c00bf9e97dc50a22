"""Settings: flags > environment > config.toml > defaults, and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from retinue.config import DEFAULT_MODEL_ALIASES, Settings
from retinue.errors import ConfigError


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("RETINUE_MODEL", raising=False)
    monkeypatch.setenv("RETINUE_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


def test_defaults(home: Path, tmp_path: Path) -> None:
    s = Settings.load(workspace=tmp_path)
    assert s.home == home.resolve() and s.model is None and s.max_depth == 3
    assert s.model_aliases == DEFAULT_MODEL_ALIASES


def test_flag_beats_environment_beats_file(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (home / "config.toml").write_text(
        'model = "openai:from-file"\nmax_iterations = 7\nsession_token_budget = 5000\n'
        '[model_aliases]\nsonnet = "openai:gpt-4o"\n'
    )
    s = Settings.load(workspace=tmp_path)
    assert (s.model, s.max_iterations, s.session_token_budget) == ("openai:from-file", 7, 5000)
    assert s.model_aliases["sonnet"] == "openai:gpt-4o"
    assert s.model_aliases["haiku"] == DEFAULT_MODEL_ALIASES["haiku"]
    monkeypatch.setenv("RETINUE_MODEL", "openai:from-env")
    assert Settings.load(workspace=tmp_path).model == "openai:from-env"
    assert Settings.load(workspace=tmp_path, model="openai:flag").model == "openai:flag"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("modle = 'x'", "unknown setting 'modle'"),
        ("max_depth = 'three'", "max_depth must be an integer"),
        ("model = ", "cannot read"),
        ("model_aliases = 3", "model_aliases must be a table"),
        ("max_iterations = -5", "max_iterations: Input should be greater than or equal to 1"),
        ("max_iterations = true", "max_iterations must be an integer, not True"),
        ("max_depth = 1000", "max_depth: Input should be less than or equal to 32"),
        ("session_token_budget = -1", "session_token_budget: Input should be greater"),
        ("tenant = ''", "tenant: String should have at least 1 character"),
        ("[model_aliases]\nfast = 3", "model_aliases.fast must be a string"),
    ],
)
def test_bad_config_file_names_the_problem(
    home: Path, tmp_path: Path, text: str, message: str
) -> None:
    (home / "config.toml").write_text(text)
    with pytest.raises(ConfigError, match=message):
        Settings.load(workspace=tmp_path)


def test_workspace_must_be_a_directory(home: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--workspace"):
        Settings.load(workspace=tmp_path / "missing")


def test_the_embedded_default_says_what_it_manages_and_how_to_choose_another(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Nothing reaches 6 of 10 on the task suite (issue 32): the first screen says so."""
    from retinue.runtime import LOCAL_DEFAULT, choose_model

    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "RETINUE_MODEL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr("retinue.llm._gguf.installed", lambda model: True)
    model, notice = choose_model(Settings.load(home=tmp_path, workspace=tmp_path))
    assert model == LOCAL_DEFAULT and notice is not None
    assert "small tasks only" in notice and "Ollama or vLLM" in notice
    assert "OPENAI_BASE_URL=<server>/v1 --model openai:<name>" in notice


def test_with_only_another_tier_installed_the_default_is_that_tier(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Whoever installed only ``local-0.5b`` gets it, not an error asking for 1.1 GB more;
    with no tier installed the default stays, and its error names the ``local`` extra."""
    from retinue.llm._gguf import MODELS
    from retinue.runtime import LOCAL_DEFAULT, choose_model

    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "RETINUE_MODEL"):
        monkeypatch.delenv(name, raising=False)
    small = MODELS["qwen2.5-coder-0.5b"]
    settings = Settings.load(home=tmp_path, workspace=tmp_path)
    monkeypatch.setattr("retinue.llm._gguf.installed", lambda model: model is small)
    model, notice = choose_model(settings)
    assert model == "local:qwen2.5-coder-0.5b" != LOCAL_DEFAULT
    assert notice is not None and "local:qwen2.5-coder-0.5b" in notice
    monkeypatch.setattr("retinue.llm._gguf.installed", lambda model: False)
    assert choose_model(settings)[0] == LOCAL_DEFAULT
