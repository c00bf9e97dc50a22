"""Which API an ``openai:`` model speaks: Responses on OpenAI's own API, Chat Completions on any
other base URL, and the ``api`` setting (RETINUE_OPENAI_API, ``[providers.openai]``) over both."""

from __future__ import annotations

from pathlib import Path

import pytest

from retinue.config import Settings, provider_api
from retinue.errors import ConfigError
from retinue.llm import resolve_model
from retinue.llm.loopback_responses import LoopbackResponsesServer
from retinue.llm.openai import OpenAIModel
from retinue.llm.openai_responses import OpenAIResponsesModel, openai_api
from retinue.messages import UserMessage
from retinue.testing import ScriptedModel


@pytest.fixture(autouse=True)
def _no_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RETINUE_OPENAI_API", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def test_the_default_follows_the_base_url() -> None:
    assert openai_api("https://api.openai.com/v1") == "responses"
    for url in (
        "http://127.0.0.1:11434/v1",  # Ollama
        "http://localhost:8000/v1",  # vLLM, llama.cpp server
        "https://api.deepseek.com/v1",
        "https://example.openai.azure.com/openai/v1",
    ):
        assert openai_api(url) == "chat"
    assert openai_api("https://api.openai.com/v1", "chat") == "chat"
    assert openai_api("http://localhost:8000/v1", "responses") == "responses"
    with pytest.raises(ConfigError, match="responses, chat"):
        openai_api("http://localhost:8000/v1", "completions")


def test_resolve_model_picks_the_api(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert isinstance(resolve_model("openai:gpt-5.6-terra"), OpenAIResponsesModel)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1")
    assert isinstance(resolve_model("openai:qwen3"), OpenAIModel)
    monkeypatch.setenv("RETINUE_OPENAI_API", "responses")
    assert isinstance(resolve_model("openai:qwen3"), OpenAIResponsesModel)
    monkeypatch.setenv("RETINUE_OPENAI_API", "nonsense")
    with pytest.raises(ConfigError, match="RETINUE_OPENAI_API"):
        resolve_model("openai:qwen3")


def _config(home: Path, text: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(text, encoding="utf-8")


def test_config_toml_sets_the_api_and_the_environment_wins(
    monkeypatch: pytest.MonkeyPatch, _test_home: Path
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert provider_api("openai") is None
    _config(_test_home, '[providers.openai]\napi = "chat"\n')
    assert provider_api("openai") == "chat"
    assert isinstance(resolve_model("openai:gpt-5.6-terra"), OpenAIModel)
    assert Settings.load(home=_test_home).providers == {"openai": {"api": "chat"}}
    monkeypatch.setenv("RETINUE_OPENAI_API", "responses")
    assert isinstance(resolve_model("openai:gpt-5.6-terra"), OpenAIResponsesModel)


def test_a_wrong_api_in_config_toml_names_the_setting(_test_home: Path) -> None:
    _config(_test_home, '[providers.openai]\napi = "completions"\n')
    with pytest.raises(ConfigError, match=r"providers\.openai\.api"):
        provider_api("openai")


async def test_a_forced_responses_api_reaches_a_custom_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with LoopbackResponsesServer(ScriptedModel(["over responses"])) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("RETINUE_OPENAI_API", "responses")
        model = resolve_model("openai:gpt-5.6-terra")
        response = await model.complete([UserMessage("hi")])
        await model.aclose()  # type: ignore[attr-defined]
    assert response.message.content == "over responses"
    assert server.requests[0]["input"] == [{"role": "user", "content": "hi"}]
