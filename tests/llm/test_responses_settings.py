"""ModelSettings on the Responses adapter: what reaches the request body, and what is left out
rather than refused by the emulated rules (a reasoning model takes no temperature)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from retinue.llm.loopback_responses import LoopbackResponsesServer
from retinue.llm.openai_responses import OpenAIResponsesModel, settings_fields
from retinue.llm.settings import ModelSettings, with_settings
from retinue.messages import UserMessage
from retinue.testing import ScriptedModel

HI = [UserMessage("hi")]
SETTINGS = ModelSettings(
    effort="high",
    max_output_tokens=2048,
    temperature=0.2,
    top_p=0.9,
    cache_ttl="1h",
    extra={"service_tier": "flex", "store": True},
)


@pytest.fixture
async def server() -> AsyncIterator[LoopbackResponsesServer]:
    with LoopbackResponsesServer(ScriptedModel(responder=lambda m, t: "ok")) as served:
        yield served


async def _body(server: LoopbackResponsesServer, name: str, settings: ModelSettings) -> Any:
    base = OpenAIResponsesModel(name, base_url=server.base_url, max_retries=0)
    model = with_settings(base, settings)
    assert isinstance(model, OpenAIResponsesModel) and model is not base
    assert (await model.complete(HI)).message.content == "ok"
    await model.aclose()
    return server.requests[-1]


async def test_a_reasoning_model_gets_effort_and_no_sampling(
    server: LoopbackResponsesServer, caplog: pytest.LogCaptureFixture
) -> None:
    body = await _body(server, "gpt-5.6-terra", SETTINGS)
    assert server.rejected == []
    assert body["reasoning"] == {"effort": "high"}
    assert body["max_output_tokens"] == 2048 and body["service_tier"] == "flex"
    assert "temperature" not in body and "top_p" not in body
    assert body["store"] is False  # Retinue's own field is not overridden by extra
    left_out = " ".join(r.getMessage() for r in caplog.records)
    assert "temperature" in left_out and "cache_ttl" in left_out and "extra.store" in left_out


async def test_a_model_that_does_not_reason_gets_sampling_and_no_effort(
    server: LoopbackResponsesServer,
) -> None:
    body = await _body(server, "gpt-4.1", SETTINGS)
    assert body["temperature"] == 0.2 and body["top_p"] == 0.9
    assert "reasoning" not in body


async def test_sampling_sent_to_a_reasoning_model_would_be_refused(
    server: LoopbackResponsesServer,
) -> None:
    """The rule the adapter keeps: the emulation refuses what OpenAI refuses."""
    from openai import AsyncOpenAI, BadRequestError

    client = AsyncOpenAI(api_key="sk-test", base_url=server.base_url, max_retries=0)
    with pytest.raises(BadRequestError, match="Only the default \\(1\\) value is supported"):
        await client.responses.create(model="gpt-5.6-terra", input="hi", temperature=0.2)
    await client.close()


def test_max_effort_is_openais_highest_and_settings_merge() -> None:
    fields, dropped = settings_fields("gpt-5.6-terra", ModelSettings(effort="max"))
    assert fields == {"reasoning": {"effort": "xhigh"}} and dropped == []
    model = OpenAIResponsesModel("gpt-5.6-terra", base_url="http://127.0.0.1:9/v1")
    first = model.with_settings(ModelSettings(effort="low", max_output_tokens=100, timeout=5))
    second = first.with_settings(ModelSettings(effort="high"))
    assert second.settings == ModelSettings(effort="high", max_output_tokens=100, timeout=5)
    assert second.timeout == 5
