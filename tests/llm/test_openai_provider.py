"""OpenAIModel over real HTTP against the loopback OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from retinue.engine import RunConfig, run
from retinue.errors import ConfigError, ContextTooLongError, ModelError
from retinue.llm import resolve_model
from retinue.llm.base import ModelResponse, ToolSpec
from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.llm.openai import OpenAIModel
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

HELLO = [SystemMessage("You are terse."), UserMessage("hi")]
ADD = ToolSpec("add", "Add two numbers", {"type": "object", "properties": {"a": {}, "b": {}}})


_open: list[OpenAIModel] = []


@pytest.fixture(autouse=True)
async def _close_models() -> AsyncIterator[None]:
    """Close each test's HTTP connections on its own event loop."""
    yield
    while _open:
        await _open.pop().aclose()


def make(server: LoopbackOpenAIServer, retries: int = 2) -> OpenAIModel:
    model = OpenAIModel("gpt-test", base_url=server.base_url, max_retries=retries)
    _open.append(model)
    return model


async def test_plain_answer_and_usage_figures() -> None:
    reply = ModelResponse(AssistantMessage("Hello!"), Usage(120, 7, 100, 1))
    with LoopbackOpenAIServer(ScriptedModel([reply])) as server:
        model = make(server)
        response = await model.complete(HELLO, [ADD])
    assert model.name == "openai:gpt-test"
    assert response.message == AssistantMessage("Hello!")
    assert response.usage == Usage(120, 7, 100, 1)
    assert response.finish_reason == "stop"
    body = server.requests[0]
    assert body["model"] == "gpt-test"
    assert body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "hi"},
    ]
    assert body["tools"][0]["function"]["name"] == "add"
    assert "stream" not in body


async def test_parallel_tool_calls_plain() -> None:
    step = call_tools(("add", {"a": 1, "b": 2}, "c1"), ("add", {"a": 3, "b": 4}, "c2"))
    with LoopbackOpenAIServer(ScriptedModel([step])) as server:
        response = await make(server).complete(HELLO, [ADD])
    assert response.message.tool_calls == step.tool_calls
    assert response.finish_reason == "tool_calls"


async def test_streaming_text_deltas_arrive_in_order() -> None:
    text = "The quick brown fox jumps over the lazy dog."
    reply = ModelResponse(AssistantMessage(text), Usage(50, 11, 0, 1))
    with LoopbackOpenAIServer(ScriptedModel([reply]), chunk_size=5) as server:
        deltas: list[str] = []
        response = await make(server).complete(HELLO, on_text=deltas.append)
    assert len(deltas) == 9
    assert "".join(deltas) == text
    assert response.message.content == text
    assert response.usage == Usage(50, 11, 0, 1)
    assert server.requests[0]["stream"] is True
    assert server.requests[0]["stream_options"] == {"include_usage": True}


async def test_streaming_parallel_tool_calls_are_assembled() -> None:
    step = call_tools(
        ("add", {"a": 1, "b": 2, "note": "a longer argument text"}, "c1"),
        ("lookup", {"q": "weather in Paris"}, "c2"),
    )
    with LoopbackOpenAIServer(ScriptedModel([step]), chunk_size=4) as server:
        deltas: list[str] = []
        response = await make(server).complete(HELLO, [ADD], on_text=deltas.append)
    assert response.message.tool_calls == step.tool_calls
    assert response.finish_reason == "tool_calls"
    assert deltas == []


async def test_history_with_tool_results_reaches_the_server_in_wire_form() -> None:
    history: list[Message] = [
        *HELLO,
        call_tool("add", {"a": 1, "b": 2}, id="c1"),
        ToolResultMessage("c1", "add", "3"),
    ]
    with LoopbackOpenAIServer(ScriptedModel(["3"])) as server:
        await make(server).complete(history, [ADD])
    wire = server.requests[0]["messages"]
    assert wire[2]["tool_calls"][0] == {
        "id": "c1",
        "type": "function",
        "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'},
    }
    assert wire[3] == {"role": "tool", "tool_call_id": "c1", "content": "3"}


async def test_rate_limit_then_success_is_retried() -> None:
    with LoopbackOpenAIServer(ScriptedModel(["ok"]), fail_first=[429]) as server:
        response = await make(server).complete(HELLO)
    assert response.message.content == "ok"
    assert server.request_count == 2


async def test_server_error_until_failure_gives_one_clear_line() -> None:
    server = LoopbackOpenAIServer(ScriptedModel(), fail_always=500)
    with server, pytest.raises(ModelError) as info:
        await make(server, retries=2).complete(HELLO)
    assert server.request_count == 3
    message = str(info.value)
    assert "HTTP 500" in message and "retries exhausted" in message and "3 attempts" in message
    assert "\n" not in message
    assert info.value.status_code == 500


async def test_scripted_status_error_is_retried_like_a_real_one() -> None:
    busy = ModelError("overloaded", status_code=503)
    with LoopbackOpenAIServer(ScriptedModel([busy, "fine"])) as server:
        response = await make(server).complete(HELLO)
    assert response.message.content == "fine"
    assert server.request_count == 2


async def test_unauthorised_names_the_key_variable() -> None:
    server = LoopbackOpenAIServer(ScriptedModel(), fail_first=[401])
    with server, pytest.raises(ModelError, match="OPENAI_API_KEY") as info:
        await make(server).complete(HELLO)
    assert server.request_count == 1
    assert info.value.status_code == 401


async def test_context_length_error_is_context_too_long() -> None:
    too_long = ContextTooLongError("This model's maximum context length is 8192 tokens")
    server = LoopbackOpenAIServer(ScriptedModel([too_long]))
    with server, pytest.raises(ContextTooLongError, match="context window"):
        await make(server).complete(HELLO)
    assert server.request_count == 1


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_connection_failure_names_the_base_url_variable() -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    model = OpenAIModel("m", base_url=url, max_retries=0)
    with pytest.raises(ModelError) as info:
        await model.complete(HELLO)
    assert "OPENAI_BASE_URL" in str(info.value) and url in str(info.value)


async def test_guard_refuses_a_real_endpoint() -> None:
    model = OpenAIModel("gpt-4o-mini", base_url="https://api.openai.com/v1", api_key="sk-test")
    with pytest.raises(ModelError, match="blocked"):
        await model.complete(HELLO)


def test_missing_key_for_the_official_endpoint_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        OpenAIModel("gpt-4o-mini")


async def test_resolve_model_honours_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    with LoopbackOpenAIServer(ScriptedModel(["from env"])) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        model = resolve_model("openai:x")
        assert isinstance(model, OpenAIModel)
        assert model.name == "openai:x"
        response = await model.complete(HELLO)
        await model.aclose()
    assert response.message.content == "from env"
    assert server.requests[0]["model"] == "x"


@tool()
def add(ctx: ToolContext, a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


async def test_malformed_arguments_reach_the_loop_as_an_error_result(tmp_path: Path) -> None:
    def answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        last = messages[-1]
        assert isinstance(last, ToolResultMessage)
        return f"saw: {last.content}"  # the wire carries no is_error flag, only the text

    script = ScriptedModel([call_tool("add", '{"a": 1, "b":', id="bad"), answer])
    with LoopbackOpenAIServer(script) as server:
        config = RunConfig(
            model=make(server),
            messages=[*HELLO],
            tools=ToolRegistry([add]),
            context=ToolContext("main", tmp_path, tmp_path),
        )
        out = await run(config)
    assert out.content.startswith("saw: Error: arguments are not valid JSON")
    results = [m for m in out.messages if isinstance(m, ToolResultMessage)]
    assert len(results) == 1 and results[0].is_error and "JSON" in results[0].content
    calls = [m for m in out.messages if isinstance(m, AssistantMessage) and m.tool_calls]
    assert calls[0].tool_calls[0].arguments == '{"a": 1, "b":'
    assert out.usage.requests == 2


async def test_timeouts_are_retried_then_reported() -> None:
    server = LoopbackOpenAIServer(ScriptedModel(responder=lambda m, t: "late", delay=0.4))
    with server:
        model = OpenAIModel("m", base_url=server.base_url, max_retries=1, timeout=0.1)
        with pytest.raises(ModelError, match="timed out") as info:
            await model.complete(HELLO)
        for _ in range(3000):  # the server's threads count what they were sent (polled)
            if server.request_count >= 2:
                break
            await asyncio.sleep(0.02)
    assert server.request_count == 2
    assert "OPENAI_BASE_URL" in str(info.value)
