"""AnthropicModel over real HTTP against a loopback Messages API server on 127.0.0.1."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path

import pytest

from retinue.engine import RunConfig, run
from retinue.errors import ConfigError, ContextTooLongError, ModelError
from retinue.llm import resolve_model
from retinue.llm.anthropic import AnthropicModel
from retinue.llm.base import ModelResponse, ToolSpec
from retinue.llm.loopback import LoopbackServer
from retinue.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from retinue.testing import ScriptedModel, call_tool, call_tools
from retinue.tools.base import ToolContext, ToolRegistry, tool

Factory = Callable[..., LoopbackServer]
HELLO = [SystemMessage("You are terse."), UserMessage("hi")]
ADD = ToolSpec("add", "Add two numbers", {"type": "object", "properties": {"a": {}, "b": {}}})


_open: list[AnthropicModel] = []


@pytest.fixture(autouse=True)
async def _close_models() -> AsyncIterator[None]:
    """Close each test's HTTP connections on its own event loop."""
    yield
    while _open:
        await _open.pop().aclose()


def make(server: LoopbackServer, retries: int = 2) -> AnthropicModel:
    model = AnthropicModel("claude-test", base_url=server.base_url, max_retries=retries)
    _open.append(model)
    return model


async def test_plain_answer_usage_and_request_shape(anthropic_server: Factory) -> None:
    reply = ModelResponse(AssistantMessage("Hello!"), Usage(120, 7, 100, 1))
    server = anthropic_server(ScriptedModel([reply]))
    model = make(server)
    response = await model.complete(HELLO, [ADD])
    assert model.name == "anthropic:claude-test"
    assert response.message == AssistantMessage("Hello!")
    assert response.usage == Usage(120, 7, 100, 1)
    assert response.finish_reason == "stop"
    body = server.requests[0]
    assert body["model"] == "claude-test" and body["max_tokens"] == 4096
    cache = {"type": "ephemeral"}
    assert body["system"] == [{"type": "text", "text": "You are terse.", "cache_control": cache}]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": cache}]}
    ]
    assert body["tools"][0]["input_schema"] == ADD.parameters


async def test_tool_results_are_merged_into_one_user_message(anthropic_server: Factory) -> None:
    history: list[Message] = [
        *HELLO,
        call_tools(("add", {"a": 1, "b": 2}, "c1"), ("add", {"a": 3, "b": 4}, "c2")),
        ToolResultMessage("c1", "add", "3"),
        ToolResultMessage("c2", "add", "Error: boom", is_error=True),
    ]
    server = anthropic_server(ScriptedModel(["3 and an error"]))
    await make(server).complete(history, [ADD])
    wire = server.requests[0]["messages"]
    assert [m["role"] for m in wire] == ["user", "assistant", "user"]
    assert [b["type"] for b in wire[1]["content"]] == ["tool_use", "tool_use"]
    assert wire[1]["content"][0]["input"] == {"a": 1, "b": 2}
    results = wire[2]["content"]
    assert [b["tool_use_id"] for b in results] == ["c1", "c2"]
    assert "is_error" not in results[0] and results[1]["is_error"] is True
    assert results[1]["cache_control"] == {"type": "ephemeral"}


async def test_parallel_tool_calls_plain(anthropic_server: Factory) -> None:
    step = call_tools(("add", {"a": 1, "b": 2}, "t1"), ("add", {"a": 3, "b": 4}, "t2"))
    server = anthropic_server(ScriptedModel([step]))
    response = await make(server).complete(HELLO, [ADD])
    assert response.message.tool_calls == step.tool_calls
    assert response.finish_reason == "tool_calls"


async def test_streaming_text_deltas_in_order(anthropic_server: Factory) -> None:
    text = "The quick brown fox jumps over the lazy dog."
    reply = ModelResponse(AssistantMessage(text), Usage(50, 11, 20, 1))
    server = anthropic_server(ScriptedModel([reply]), chunk_size=5)
    deltas: list[str] = []
    response = await make(server).complete(HELLO, on_text=deltas.append)
    assert len(deltas) == 9 and "".join(deltas) == text
    assert response.message.content == text
    assert response.usage == Usage(50, 11, 20, 1)
    assert server.requests[0]["stream"] is True


async def test_streaming_text_and_parallel_tool_calls(anthropic_server: Factory) -> None:
    step = call_tools(("add", {"a": 1, "b": 2}, "t1"), ("lookup", {"q": "weather"}, "t2"))
    step = AssistantMessage("Let me check.", step.tool_calls)
    server = anthropic_server(ScriptedModel([step]), chunk_size=3)
    deltas: list[str] = []
    response = await make(server).complete(HELLO, [ADD], on_text=deltas.append)
    assert "".join(deltas) == "Let me check."
    assert response.message.tool_calls == step.tool_calls
    assert response.finish_reason == "tool_calls"


async def test_rate_limit_then_success(anthropic_server: Factory) -> None:
    server = anthropic_server(ScriptedModel(["ok"]), fail_first=[429])
    assert (await make(server).complete(HELLO)).message.content == "ok"
    assert server.request_count == 2


async def test_overloaded_until_failure(anthropic_server: Factory) -> None:
    server = anthropic_server(ScriptedModel(), fail_always=529)
    with pytest.raises(ModelError, match="retries exhausted") as info:
        await make(server, retries=3).complete(HELLO)
    assert server.request_count == 4
    assert "HTTP 529" in str(info.value) and "4 attempts" in str(info.value)


async def test_unauthorised_names_the_key_variable(anthropic_server: Factory) -> None:
    server = anthropic_server(ScriptedModel(), fail_first=[401])
    with pytest.raises(ModelError, match="ANTHROPIC_API_KEY"):
        await make(server).complete(HELLO)
    assert server.request_count == 1


async def test_prompt_too_long_is_context_too_long(anthropic_server: Factory) -> None:
    server = anthropic_server(ScriptedModel([ContextTooLongError("250000 tokens > 200000")]))
    with pytest.raises(ContextTooLongError):
        await make(server).complete(HELLO)


async def test_connection_failure_names_the_base_url_variable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    with pytest.raises(ModelError) as info:
        await AnthropicModel("c", base_url=url, max_retries=0).complete(HELLO)
    assert "ANTHROPIC_BASE_URL" in str(info.value) and url in str(info.value)


async def test_guard_refuses_a_real_endpoint() -> None:
    model = AnthropicModel("claude-sonnet-4-5", api_key="sk-ant-test")
    with pytest.raises(ModelError, match="blocked"):
        await model.complete(HELLO)


def test_missing_key_for_the_official_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        AnthropicModel("claude-sonnet-4-5")


async def test_resolve_model_honours_the_environment(
    anthropic_server: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = anthropic_server(ScriptedModel(["from env"]))
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
    model = resolve_model("anthropic:y")
    assert isinstance(model, AnthropicModel) and model.name == "anthropic:y"
    assert (await model.complete(HELLO)).message.content == "from env"
    assert server.requests[0]["model"] == "y"


@tool()
def add(ctx: ToolContext, a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


async def test_a_tool_error_reaches_the_model_flagged(
    anthropic_server: Factory, tmp_path: Path
) -> None:
    def answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        last = messages[-1]
        assert isinstance(last, ToolResultMessage)
        return f"is_error={last.is_error}"

    script = ScriptedModel([call_tool("add", {"a": "not a number", "b": 1}), answer])
    server = anthropic_server(script)
    config = RunConfig(
        model=make(server),
        messages=[*HELLO],
        tools=ToolRegistry([add]),
        context=ToolContext("main", tmp_path, tmp_path),
    )
    out = await run(config)
    assert out.content == "is_error=True"
    assert server.requests[1]["messages"][-1]["content"][0]["is_error"] is True
