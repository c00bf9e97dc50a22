"""OpenAIResponsesModel over real HTTP, through the official SDK, against the loopback emulation
of OpenAI's documented rules (retinue.llm.loopback_responses) on an emulated gpt-5.6-terra."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from retinue.engine import RunConfig, run
from retinue.errors import ContextTooLongError, ModelError, ModelRefusal
from retinue.llm.base import ModelResponse, ToolSpec
from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.llm.loopback_responses import LoopbackResponsesServer
from retinue.llm.openai import OpenAIModel
from retinue.llm.openai_responses import OpenAIResponsesModel, build_params
from retinue.messages import (
    AssistantMessage,
    Message,
    ReasoningPart,
    SystemMessage,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from retinue.testing import ScriptedModel, call_tool, call_tools
from retinue.tools.base import ToolContext, ToolRegistry, tool

TERRA = "gpt-5.6-terra"
HELLO: list[Message] = [SystemMessage("You are terse."), UserMessage("add 1 and 2, then 3")]
ADD = ToolSpec("add", "Add two numbers", {"type": "object", "properties": {"a": {}, "b": {}}})

_open: list[OpenAIResponsesModel | OpenAIModel] = []


@pytest.fixture(autouse=True)
async def _close_models() -> AsyncIterator[None]:
    yield
    while _open:
        await _open.pop().aclose()


def make(
    server: LoopbackOpenAIServer, name: str = TERRA, reasoning_effort: str | None = None
) -> OpenAIResponsesModel:
    model = OpenAIResponsesModel(
        name, base_url=server.base_url, max_retries=1, reasoning_effort=reasoning_effort
    )
    _open.append(model)
    return model


@tool()
def add(ctx: ToolContext, a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


def loop_script() -> ScriptedModel:
    return ScriptedModel(
        [
            call_tool("add", {"a": 1, "b": 2}, id="c1"),
            call_tools(("add", {"a": 3, "b": 3}, "c2"), ("add", {"a": 0, "b": 0}, "c3")),
            "The sum is 6.",
        ]
    )


async def _loop(model: OpenAIResponsesModel | OpenAIModel, tmp_path: Path) -> list[Message]:
    config = RunConfig(
        model=model,
        messages=list(HELLO),
        tools=ToolRegistry([add]),
        context=ToolContext("main", tmp_path, tmp_path),
    )
    out = await run(config)
    assert out.content == "The sum is 6."
    return out.messages


async def test_a_tool_loop_finishes_with_no_request_rejected(tmp_path: Path) -> None:
    with LoopbackResponsesServer(loop_script()) as server:
        messages = await _loop(make(server), tmp_path)
    assert server.rejected == []
    assert server.request_count == 3
    # each request replays every earlier reasoning item, verbatim, right before its calls
    issued = [m.reasoning[0].data for m in messages if isinstance(m, AssistantMessage)]
    third = server.requests[2]["input"]
    kinds = [item.get("type") or item.get("role") for item in third]
    assert kinds == [
        "user",
        "reasoning",
        "function_call",
        "function_call_output",
        "reasoning",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
    ]
    assert [third[1], third[4]] == issued[:2]
    assert all(item["encrypted_content"].startswith("gAAAAA") for item in issued)
    body = server.requests[0]
    assert body["store"] is False
    assert body["include"] == ["reasoning.encrypted_content"]
    assert body["instructions"] == "You are terse."


async def test_the_same_loop_over_chat_completions_is_refused_by_the_vendor(
    tmp_path: Path,
) -> None:
    """Why Responses: the model refuses function tools on Chat Completions while reasoning."""
    with LoopbackResponsesServer(loop_script()) as server:
        chat = OpenAIModel(TERRA, base_url=server.base_url, max_retries=1)
        _open.append(chat)
        with pytest.raises(ModelError) as info:
            await _loop(chat, tmp_path)
    message = str(info.value)
    assert message.count("\n") == 0 and info.value.status_code == 400
    assert (
        "Function tools with reasoning_effort are not supported for gpt-5.6-terra in "
        "/v1/chat/completions. To use function tools, use /v1/responses or set "
        "reasoning_effort to 'none'."
    ) in message
    assert "RETINUE_OPENAI_API=responses" in message
    assert server.rejected and server.rejected[0][0] == 400


async def _history_after_one_call(model: OpenAIResponsesModel) -> list[Message]:
    response = await model.complete(HELLO, [ADD])
    assert response.message.reasoning, "a reasoning model sends a reasoning item"
    return [*HELLO, response.message, ToolResultMessage("c1", "add", "3")]


@pytest.mark.parametrize(
    ("breakage", "status", "text"),
    [
        ("drop", 400, "of type 'function_call' was provided without its required 'reasoning'"),
        ("id_only", 404, "Items are not persisted when `store` is set to false"),
        ("tampered", 400, "could not be verified"),
        ("other_model", 400, "of type 'function_call' was provided without its required"),
    ],
)
async def test_a_reasoning_item_not_replayed_verbatim_is_refused(
    breakage: str, status: int, text: str
) -> None:
    """Each rule fails when the reasoning item is not sent back as it came."""
    script = ScriptedModel([call_tool("add", {"a": 1, "b": 2}, id="c1"), "3", "3"])
    with LoopbackResponsesServer(script) as server:
        model = make(server)
        history = await _history_after_one_call(model)
        reply = history[2]
        assert isinstance(reply, AssistantMessage)
        part = reply.reasoning[0]
        if breakage == "drop":
            changed = replace(reply, reasoning=())
        elif breakage == "id_only":
            data = {k: v for k, v in part.data.items() if k != "encrypted_content"}
            changed = replace(reply, reasoning=(replace(part, data=data),))
        elif breakage == "tampered":
            data = {**part.data, "encrypted_content": part.data["encrypted_content"] + "x"}
            changed = replace(reply, reasoning=(replace(part, data=data),))
        else:  # made by another model: left out by the adapter, so the call lacks it
            changed = replace(reply, reasoning=(replace(part, model="gpt-5.4"),))
        history[2] = changed
        with pytest.raises(ModelError) as info:
            await model.complete(history, [ADD])
        assert info.value.status_code == status and text in str(info.value)
        # sent as it came, the same history is accepted
        history[2] = reply
        assert (await model.complete(history, [ADD])).message.content == "3"
    assert len(server.rejected) == 1


async def test_a_tool_result_without_its_call_is_refused() -> None:
    with LoopbackResponsesServer(ScriptedModel(["unused"])) as server:
        history = [*HELLO, AssistantMessage("thinking"), ToolResultMessage("c9", "add", "3")]
        with pytest.raises(ModelError, match="No tool call found for function call output"):
            await make(server).complete(history, [ADD])
    assert server.rejected == [
        (400, "No tool call found for function call output with call_id c9.")
    ]


def test_reasoning_goes_only_to_the_model_that_made_it() -> None:
    mine = ReasoningPart("openai", TERRA, "reasoning", {"id": "rs_1", "type": "reasoning"})
    other = ReasoningPart("openai", "gpt-5.4", "reasoning", {"id": "rs_2", "type": "reasoning"})
    claude = ReasoningPart("anthropic", TERRA, "thinking", {"type": "thinking"})
    reply = call_tool("add", {"a": 1}, id="c1")
    history = [
        *HELLO,
        replace(reply, content="Adding.", reasoning=(other, mine, claude)),
        ToolResultMessage("c1", "add", "1"),
    ]
    params = build_params(TERRA, history, [ADD], reasoning_effort="high")
    assert params["input"][1:] == [
        {"id": "rs_1", "type": "reasoning"},
        {"role": "assistant", "content": "Adding."},
        {"type": "function_call", "call_id": "c1", "name": "add", "arguments": '{"a": 1}'},
        {"type": "function_call_output", "call_id": "c1", "output": "1"},
    ]
    assert params["input"][1] is mine.data  # the provider's JSON itself, not a copy
    assert params["reasoning"] == {"effort": "high"}
    assert params["tools"] == [
        {
            "type": "function",
            "name": "add",
            "description": "Add two numbers",
            "parameters": ADD.parameters,
            "strict": False,
        }
    ]


async def test_usage_figures_are_mapped() -> None:
    reply = ModelResponse(AssistantMessage("Hello!"), Usage(120, 9, 100, 1))
    with LoopbackResponsesServer(ScriptedModel([reply])) as server:
        response = await make(server).complete(HELLO)
    assert response.usage == Usage(120, 9, 100, 1)  # reasoning tokens are within output
    assert response.finish_reason == "stop"
    assert response.message.content == "Hello!"


async def test_reasoning_effort_is_sent_and_none_turns_reasoning_off() -> None:
    with LoopbackResponsesServer(ScriptedModel(["a", "b"])) as server:
        high = await make(server, reasoning_effort="high").complete(HELLO, [ADD])
        off = await make(server, reasoning_effort="none").complete(HELLO, [ADD])
    assert [r.get("reasoning") for r in server.requests] == [{"effort": "high"}, {"effort": "none"}]
    assert len(high.message.reasoning) == 1 and off.message.reasoning == ()


async def test_streaming_delivers_text_and_keeps_calls_and_reasoning() -> None:
    text = "The quick brown fox jumps over the lazy dog."
    step = call_tools(("add", {"a": 1, "b": 2, "note": "a longer argument"}, "c1"))
    script = ScriptedModel([step, ModelResponse(AssistantMessage(text), Usage(50, 11, 5, 1))])
    with LoopbackResponsesServer(script) as server:
        model = make(server)
        deltas: list[str] = []
        first = await model.complete(HELLO, [ADD], on_text=deltas.append)
        assert first.message.tool_calls == step.tool_calls and deltas == []
        assert first.finish_reason == "tool_calls"
        history = [*HELLO, first.message, ToolResultMessage("c1", "add", "3")]
        second = await model.complete(history, [ADD], on_text=deltas.append)
    assert server.rejected == []
    assert server.requests[0]["stream"] is True
    assert len(deltas) == 6 and "".join(deltas) == text
    assert second.message.content == text and second.usage == Usage(50, 11, 5, 1)
    replayed = server.requests[1]["input"][1]
    assert replayed == first.message.reasoning[0].data and "encrypted_content" in replayed


async def test_a_refusal_is_a_model_refusal() -> None:
    refusal = ModelResponse(AssistantMessage("I can't help with that."), finish_reason="refusal")
    with LoopbackResponsesServer(ScriptedModel([refusal, refusal])) as server:
        model = make(server)
        with pytest.raises(ModelRefusal, match="refused to answer: I can't help with that"):
            await model.complete(HELLO)
        with pytest.raises(ModelRefusal):
            await model.complete(HELLO, on_text=lambda _: None)


async def test_retries_then_one_line_errors() -> None:
    with LoopbackResponsesServer(ScriptedModel(["ok"]), fail_first=[429]) as server:
        assert (await make(server).complete(HELLO)).message.content == "ok"
    assert server.request_count == 2
    server = LoopbackResponsesServer(ScriptedModel(), fail_always=500)
    with server, pytest.raises(ModelError) as info:
        await make(server).complete(HELLO)
    assert "retries exhausted" in str(info.value) and "\n" not in str(info.value)
    server = LoopbackResponsesServer(ScriptedModel(), fail_first=[401])
    with server, pytest.raises(ModelError, match="OPENAI_API_KEY"):
        await make(server).complete(HELLO)


async def test_a_server_without_responses_names_the_setting() -> None:
    server = LoopbackOpenAIServer(ScriptedModel())  # Chat Completions only
    with server, pytest.raises(ModelError) as info:
        await make(server).complete(HELLO)
    message = str(info.value)
    assert "HTTP 404" in message and "/responses" in message
    assert "RETINUE_OPENAI_API=chat" in message and "\n" not in message


async def test_the_guard_refuses_the_real_endpoint() -> None:
    model = OpenAIResponsesModel(TERRA, base_url="https://api.openai.com/v1", api_key="sk-test")
    with pytest.raises(ModelError, match="blocked"):
        await model.complete(HELLO)


async def test_a_context_overflow_is_context_too_long() -> None:
    too_long = ContextTooLongError("Your input exceeds the context window of this model.")
    server = LoopbackResponsesServer(ScriptedModel([too_long]))
    with server, pytest.raises(ContextTooLongError, match="context window"):
        await make(server).complete(HELLO)
    assert server.request_count == 1


async def test_finished_turns_may_go_without_their_reasoning() -> None:
    """As compression leaves them: only the turn in progress needs its reasoning items."""
    script = ScriptedModel([call_tool("add", {"a": 1, "b": 2}, id="c1"), "3", "4", "5"])
    with LoopbackResponsesServer(script) as server:
        model = make(server)
        history = await _history_after_one_call(model)
        reply = history[2]
        assert isinstance(reply, AssistantMessage)
        history.append((await model.complete(history, [ADD])).message)
        settled = [
            replace(m, reasoning=()) if isinstance(m, AssistantMessage) else m for m in history
        ]
        answer = await model.complete([*settled, UserMessage("and 4?")], [ADD])
        assert answer.message.content == "4"
        history[2] = replace(reply, reasoning=())  # the turn in progress: refused
        with pytest.raises(ModelError, match="without its required 'reasoning' item"):
            await model.complete(history[:4], [ADD])
    assert len(server.rejected) == 1
