"""ModelSettings: parsing, merging, and what the Anthropic adapter puts in request bodies
(checked against the loopback Messages API, which refuses what Claude refuses)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from retinue.errors import ConfigError
from retinue.llm.anthropic import AnthropicModel
from retinue.llm.loopback_anthropic import LoopbackAnthropicServer
from retinue.llm.settings import ModelSettings, with_settings
from retinue.messages import UserMessage
from retinue.testing import ScriptedModel

HI = [UserMessage("hi")]


def test_from_mapping_reads_role_file_strings() -> None:
    s = ModelSettings.from_mapping(
        {
            "effort": "High",
            "max-output-tokens": "2048",
            "temperature": "0.5",
            "fallback_models": "sonnet, haiku",
            "cache_ttl": "1h",
        },
        "role reviewer",
    )
    assert s == ModelSettings(
        effort="high",
        max_output_tokens=2048,
        temperature=0.5,
        fallback_models=("sonnet", "haiku"),
        cache_ttl="1h",
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"effort": "extreme"}, "role r: effort must be one of low, medium, high, xhigh, max"),
        ({"max_output_tokens": "lots"}, "role r: max_output_tokens must be a number"),
        ({"max_output_tokens": 0}, "max_output_tokens must be at least 1"),
        ({"temperature": 3}, "temperature must be between 0 and 2"),
        ({"cache_ttl": "1d"}, "cache_ttl must be one of 5m, 1h"),
        ({"colour": "red"}, "role r: unknown model setting 'colour'"),
    ],
)
def test_wrong_settings_are_one_line_config_errors(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ModelSettings.from_mapping(data, "role r")


def test_later_settings_win_field_by_field() -> None:
    agent = ModelSettings(effort="low", max_output_tokens=1000, extra={"a": 1})
    role = ModelSettings(effort="high", extra={"b": 2})
    assert agent.merged(role) == ModelSettings(
        effort="high", max_output_tokens=1000, extra={"a": 1, "b": 2}
    )
    assert agent.merged(None) is agent and ModelSettings().empty


def test_a_model_without_settings_support_runs_unchanged() -> None:
    model = ScriptedModel(name="scripted:x")
    assert with_settings(model, ModelSettings(effort="high")) is model
    assert with_settings(model, None) is model


@pytest.fixture
def server() -> Iterator[LoopbackAnthropicServer]:
    with LoopbackAnthropicServer(ScriptedModel(["a"] * 5)) as s:
        yield s


_open: list[AnthropicModel] = []


@pytest.fixture(autouse=True)
async def _close() -> AsyncIterator[None]:
    yield
    while _open:
        await _open.pop().aclose()


def claude(server: LoopbackAnthropicServer, name: str, settings: ModelSettings) -> Any:
    base = AnthropicModel(name, base_url=server.base_url, max_retries=0)
    model = with_settings(base, settings)
    assert isinstance(model, AnthropicModel) and model is not base
    assert with_settings(base, settings) is model  # one client per distinct settings
    _open.extend([base, model])
    return model


async def test_effort_and_output_tokens_reach_the_request_body(
    server: LoopbackAnthropicServer,
) -> None:
    settings = ModelSettings(effort="high", max_output_tokens=32_000, cache_ttl="1h")
    await claude(server, "claude-fable-5-2", settings).complete(HI)
    body = server.requests[0]
    assert body["thinking"] == {"type": "adaptive"}
    assert body["output_config"] == {"effort": "high"} and body["max_tokens"] == 32_000
    assert body["messages"][0]["content"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert server.rejected == []


async def test_sampling_settings_are_left_out_while_thinking(
    server: LoopbackAnthropicServer, caplog: pytest.LogCaptureFixture
) -> None:
    settings = ModelSettings(temperature=0.2, top_p=0.5)
    await claude(server, "claude-fable-5-2", settings).complete(HI)
    assert "temperature" not in server.requests[0] and server.rejected == []
    assert "temperature (not taken while the model thinks)" in caplog.text
    await claude(server, "claude-haiku-4-5", settings.merged(ModelSettings(effort="low"))).complete(
        HI
    )
    body = server.requests[1]
    assert (body["temperature"], body["top_p"]) == (0.2, 0.5) and "output_config" not in body
    assert "effort (the model has no adaptive thinking)" in caplog.text


def test_the_emulator_refuses_temperature_with_thinking(server: LoopbackAnthropicServer) -> None:
    import anthropic

    client = anthropic.Anthropic(api_key="x", base_url=server.base_url, max_retries=0)
    with pytest.raises(anthropic.BadRequestError, match="temperature"):
        client.messages.create(
            model="claude-fable-5-2",
            max_tokens=100,
            messages=[{"role": "user", "content": "hi"}],
            extra_body={"temperature": 0.2},  # this SDK has no temperature parameter
        )


async def test_agent_model_settings_reach_the_request_body(
    server: LoopbackAnthropicServer, tmp_path: Path
) -> None:
    from retinue import Agent, ModelSettings

    model = AnthropicModel("claude-fable-5-2", base_url=server.base_url, max_retries=0)
    _open.append(model)
    agent = Agent(
        model,
        model_settings=ModelSettings(effort="low", max_output_tokens=9_000),
        builtin_tools=False,
        memory=False,
        workspace=tmp_path,
        home=tmp_path / "home",
    )
    out = await agent.run("hi")
    assert out.content == "a" and server.rejected == []
    body = server.requests[0]
    assert body["output_config"] == {"effort": "low"} and body["max_tokens"] == 9_000


def test_config_toml_settings_by_model_or_alias() -> None:
    from retinue.llm.settings import settings_for

    table = {"fable": {"effort": "max"}, "anthropic:claude-haiku-4-5": {"max_output_tokens": 8}}
    assert settings_for("anthropic:claude-fable-5-2", table) == ModelSettings(effort="max")
    assert settings_for("anthropic:claude-haiku-4-5", table) == ModelSettings(max_output_tokens=8)
    assert settings_for("openai:gpt-5.4", table) is None
    with pytest.raises(ConfigError, match=r"\[model_settings.fable\] in config.toml: effort"):
        settings_for("openai:x", {"fable": {"effort": "huge"}})


async def test_agent_reads_model_settings_from_config_toml(
    server: LoopbackAnthropicServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from retinue import Agent, ModelSettings

    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        '[model_settings.fable]\neffort = "medium"\nmax_output_tokens = 12000\n'
    )
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("RETINUE_BLOCK_REAL_MODELS", "1")
    agent = Agent(
        "fable",
        model_settings=ModelSettings(effort="high"),  # the caller's word wins over the file's
        builtin_tools=False,
        memory=False,
        workspace=tmp_path,
        home=home,
    )
    out = await agent.run("hi")
    assert out.content == "a" and server.rejected == []
    body = server.requests[0]
    assert body["model"] == "claude-fable-5-2"
    assert body["output_config"] == {"effort": "high"} and body["max_tokens"] == 12_000


async def test_a_fallback_model_takes_over_an_overload_and_the_event_says_so(
    server: LoopbackAnthropicServer, tmp_path: Path
) -> None:
    from retinue.engine import RunConfig, run
    from retinue.events import MODEL_CALLED, Event
    from retinue.tools.base import ToolContext, ToolRegistry

    with LoopbackAnthropicServer(ScriptedModel(), fail_always=529) as overloaded:
        primary = AnthropicModel("claude-fable-5-2", base_url=overloaded.base_url, max_retries=1)
        backup = AnthropicModel("claude-opus-5-5", base_url=server.base_url, max_retries=0)
        _open.extend([primary, backup])
        settings = ModelSettings(fallback_models=("opus",))
        model = with_settings(primary, settings, lambda name: backup)
        events: list[Event] = []
        out = await run(
            RunConfig(
                model,
                [UserMessage("hi")],
                ToolRegistry([]),
                ToolContext("main", tmp_path, tmp_path, events=events.append),
            )
        )
        assert overloaded.request_count == 2  # the primary's own retry first
    assert out.content == "a" and model.name == "anthropic:claude-fable-5-2"
    [called] = [e for e in events if e.kind == MODEL_CALLED]
    assert called.data["model"] == "anthropic:claude-opus-5-5"
    assert called.data["fallback_from"] == "anthropic:claude-fable-5-2"


async def test_a_refusal_does_not_fall_back(server: LoopbackAnthropicServer) -> None:
    from retinue.errors import ModelRefusal
    from retinue.llm.base import ModelResponse
    from retinue.messages import AssistantMessage

    refusal = ModelResponse(AssistantMessage(""), finish_reason="refusal")
    with LoopbackAnthropicServer(ScriptedModel([refusal])) as refusing:
        primary = AnthropicModel("claude-fable-5-2", base_url=refusing.base_url, max_retries=0)
        backup = AnthropicModel("claude-opus-5-5", base_url=server.base_url, max_retries=0)
        _open.extend([primary, backup])
        model = with_settings(primary, ModelSettings(fallback_models=("opus",)), lambda n: backup)
        with pytest.raises(ModelRefusal):
            await model.complete(HI)
    assert server.requests == []
