"""Claude's thinking rules, played by the loopback Messages API (``loopback_anthropic``).

The emulation is checked first with the official ``anthropic`` SDK (the docs' own tool loop
passes, each broken rule is the API's 400), then Retinue's adapter and run loop are driven
through it: tool loops finish with zero rejected requests, refusals are typed errors.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, cast

import anthropic
import pytest

from retinue.engine import RunConfig, run
from retinue.errors import ModelError, ModelRefusal
from retinue.llm.anthropic import AnthropicModel
from retinue.llm.base import ModelResponse
from retinue.llm.loopback_anthropic import LoopbackAnthropicServer
from retinue.messages import (
    AssistantMessage,
    Message,
    ReasoningPart,
    SystemMessage,
    UserMessage,
    dumps_conversation,
    loads_conversation,
)
from retinue.testing import ScriptedModel, call_tool
from retinue.tools.base import ToolContext, ToolRegistry, tool

FABLE = "claude-fable-5-2"
TOOL = {
    "name": "add",
    "description": "Add two integers.",
    "input_schema": {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    },
}
REFUSED = ModelResponse(AssistantMessage(""), finish_reason="refusal")


@pytest.fixture
def serve() -> Iterator[Any]:
    started: list[LoopbackAnthropicServer] = []

    def start(script: list[Any], **options: Any) -> LoopbackAnthropicServer:
        server = LoopbackAnthropicServer(ScriptedModel(script), **options).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


_open: list[AnthropicModel] = []


@pytest.fixture(autouse=True)
async def _close_models() -> AsyncIterator[None]:
    yield
    while _open:
        await _open.pop().aclose()


def claude(server: LoopbackAnthropicServer, name: str = FABLE) -> AnthropicModel:
    model = AnthropicModel(name, base_url=server.base_url, max_retries=0)
    _open.append(model)
    return model


def sdk(server: LoopbackAnthropicServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key="x", base_url=server.base_url, max_retries=0)


def create(client: anthropic.Anthropic, **fields: Any) -> Any:
    """``client.messages.create`` with plain-dict messages (the SDK's TypedDicts aside)."""
    return cast(Any, client.messages).create(max_tokens=1024, **fields)


# -- the emulation, checked with the official SDK ------------------------------------------


def _first_turn(client: anthropic.Anthropic) -> tuple[list[dict[str, Any]], Any]:
    question = [{"role": "user", "content": "What is 2+3?"}]
    reply = create(client, model=FABLE, tools=[TOOL], messages=question)
    assert reply.stop_reason == "tool_use"
    assert [b.type for b in reply.content] == ["thinking", "redacted_thinking", "tool_use"]
    return question, reply


def _result(reply: Any) -> dict[str, Any]:
    use = next(b for b in reply.content if b.type == "tool_use")
    return {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "5"}],
    }


def test_sdk_tool_loop_as_the_docs_show_it_passes(serve: Any) -> None:
    server = serve([call_tool("add", {"a": 2, "b": 3}), "5"], redact=True)
    client = sdk(server)
    question, reply = _first_turn(client)
    echoed = [b.model_dump(exclude_none=True) for b in reply.content]
    history = [*question, {"role": "assistant", "content": echoed}, _result(reply)]
    final = create(client, model=FABLE, tools=[TOOL], messages=history)
    assert final.stop_reason == "end_turn" and final.content[-1].type == "text"
    assert server.rejected == []


def test_sdk_tool_use_without_its_thinking_is_the_apis_400(serve: Any) -> None:
    server = serve([call_tool("add", {"a": 2, "b": 3}), "5"], redact=True)
    client = sdk(server)
    question, reply = _first_turn(client)
    stripped = [b.model_dump() for b in reply.content if b.type == "tool_use"]
    history = [*question, {"role": "assistant", "content": stripped}, _result(reply)]
    with pytest.raises(anthropic.BadRequestError) as caught:
        create(client, model=FABLE, tools=[TOOL], messages=history)
    assert "Expected `thinking` or `redacted_thinking`, but found `tool_use`" in str(caught.value)


def test_sdk_changed_signature_or_foreign_block_is_refused(serve: Any) -> None:
    server = serve([call_tool("add", {"a": 2, "b": 3})])
    client = sdk(server)
    question = [{"role": "user", "content": "What is 2+3?"}]
    reply = create(client, model=FABLE, tools=[TOOL], messages=question)
    echoed = [b.model_dump(exclude_none=True) for b in reply.content]
    edited = [{**echoed[0], "thinking": echoed[0]["thinking"] + " (edited)"}, *echoed[1:]]
    for content, model in ((edited, FABLE), (echoed, "claude-opus-5-5")):
        history = [*question, {"role": "assistant", "content": content}, _result(reply)]
        with pytest.raises(anthropic.BadRequestError, match="Invalid `signature`"):
            create(
                client, model=model, tools=[TOOL], messages=history, thinking={"type": "adaptive"}
            )
    assert len(server.rejected) == 2


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"thinking": {"type": "disabled"}}, "`thinking.type.disabled` is not supported"),
        (
            {"thinking": {"type": "enabled", "budget_tokens": 2048}},
            "`thinking.type.enabled` is not supported",
        ),
        ({"tool_choice": {"type": "any"}}, "forces tool use"),
        ({"prefill": True}, "does not support assistant message prefill"),
    ],
)
def test_sdk_what_fable_refuses(serve: Any, extra: dict[str, Any], message: str) -> None:
    server = serve(["never"])
    messages: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
    if extra.pop("prefill", False):
        messages.append({"role": "assistant", "content": "Sure,"})
    with pytest.raises(anthropic.BadRequestError, match=message):
        create(sdk(server), model=FABLE, tools=[TOOL], messages=messages, **extra)
    assert server.requests == [] and len(server.rejected) == 1


def test_sdk_refusal_is_http_200_with_stop_reason_refusal(serve: Any) -> None:
    server = serve([REFUSED])
    reply = create(sdk(server), model=FABLE, messages=[{"role": "user", "content": "hi"}])
    assert reply.stop_reason == "refusal" and reply.content == []
    assert reply.stop_details is not None and reply.stop_details.category == "cyber"


# -- Retinue's adapter through the emulation -----------------------------------------------


@tool()
def add(ctx: ToolContext, a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


def _config(model: AnthropicModel, tmp_path: Path, **options: Any) -> RunConfig:
    question = [SystemMessage("Be brief."), UserMessage("What is 2+3, then 5+1?")]
    options.setdefault("messages", question)
    return RunConfig(
        model=model,
        tools=ToolRegistry([add]),
        context=ToolContext("main", tmp_path, tmp_path),
        **options,
    )


@pytest.mark.parametrize("stream", [False, True])
async def test_a_two_step_tool_loop_on_fable_is_never_refused(
    serve: Any, tmp_path: Path, stream: bool
) -> None:
    script = [call_tool("add", {"a": 2, "b": 3}), call_tool("add", {"a": 5, "b": 1}), "6"]
    server = serve(script, redact=True)
    out = await run(_config(claude(server), tmp_path, stream=stream))
    assert server.rejected == [] and out.content == "6"
    assert len(server.requests) == 3
    assert all(body["thinking"] == {"type": "adaptive"} for body in server.requests)
    assert all(body["max_tokens"] == 16_000 for body in server.requests)  # room to think
    last = server.requests[2]["messages"]
    kinds = [[b["type"] for b in m["content"]] for m in last if m["role"] == "assistant"]
    assert kinds == [["thinking", "redacted_thinking", "tool_use"]] * 2
    replies = [m for m in out.messages if isinstance(m, AssistantMessage)]
    assert [p.kind for p in replies[0].reasoning] == ["thinking", "redacted_thinking"]
    assert {(p.provider, p.model) for r in replies for p in r.reasoning} == {("anthropic", FABLE)}


async def test_a_stored_conversation_continues_on_fable(serve: Any, tmp_path: Path) -> None:
    server = serve([call_tool("add", {"a": 2, "b": 3}), "5", call_tool("add", {"a": 1}), "1"])
    out = await run(_config(claude(server), tmp_path))
    restored = loads_conversation(dumps_conversation(out.messages))
    assert restored == out.messages
    restored.append(UserMessage("And 1+0?"))
    again = await run(_config(claude(server), tmp_path, messages=restored))
    assert again.content == "1" and server.rejected == []


async def test_blocks_of_another_model_are_not_sent(serve: Any) -> None:
    foreign = ReasoningPart("anthropic", "claude-opus-5-5", "thinking", {"signature": "s"}, "t")
    openai = ReasoningPart("openai", FABLE, "reasoning", {"id": "rs_1"})
    history: list[Message] = [
        UserMessage("hi"),
        AssistantMessage("hello", (), (foreign, openai)),
        UserMessage("again"),
    ]
    server = serve(["fine"])
    response = await claude(server).complete(history)
    assert response.message.content == "fine" and server.rejected == []
    sent = server.requests[0]["messages"][1]["content"]
    assert [{k: v for k, v in b.items() if k != "cache_control"} for b in sent] == [
        {"type": "text", "text": "hello"}
    ]


@pytest.mark.parametrize("stream", [False, True])
async def test_a_refusal_is_a_typed_error_not_an_empty_answer(
    serve: Any, tmp_path: Path, stream: bool
) -> None:
    server = serve([REFUSED])
    with pytest.raises(ModelRefusal, match=r"anthropic:claude-fable-5-2 declined .*cyber"):
        await run(_config(claude(server), tmp_path, stream=stream))
    assert issubclass(ModelRefusal, ModelError)


async def test_models_without_adaptive_thinking_get_no_thinking_field(serve: Any) -> None:
    server = serve(["a", "b", "c", "d"])
    for name in ("claude-haiku-4-5", "claude-opus-4-1", "claude-sonnet-4-5"):
        await claude(server, name).complete([UserMessage("hi")])
    assert all("thinking" not in body for body in server.requests)
    await claude(server, "claude-opus-4-6").complete([UserMessage("hi")])
    assert server.requests[-1]["thinking"] == {"type": "adaptive"}


async def test_an_empty_reply_is_left_out_with_its_blocks(serve: Any) -> None:
    part = ReasoningPart("anthropic", FABLE, "thinking", {"signature": "s"}, "t")
    history: list[Message] = [
        UserMessage("hi"),
        AssistantMessage("", (), (part,)),
        UserMessage("again"),
    ]
    server = serve(["fine"])
    await claude(server).complete(history)
    wire = server.requests[0]["messages"]
    assert [m["role"] for m in wire] == ["user"] and len(wire[0]["content"]) == 2
