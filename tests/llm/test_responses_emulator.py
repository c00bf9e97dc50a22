"""The loopback emulation of OpenAI's rules, driven by the official SDK's own
``client.responses.create`` and ``chat.completions.create`` (no Retinue adapter in between)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, cast

import openai
import pytest
from openai import AsyncOpenAI

from retinue.llm.loopback_responses import LoopbackResponsesServer
from retinue.testing import ScriptedModel, call_tool

TOOLS: Any = [
    {"type": "function", "name": "add", "parameters": {"type": "object"}, "strict": False}
]


@pytest.fixture
async def served() -> AsyncIterator[tuple[LoopbackResponsesServer, AsyncOpenAI]]:
    script = ScriptedModel(responder=lambda m, t: call_tool("add", {"a": 1}, id="c1"))
    with LoopbackResponsesServer(script) as server:
        client = AsyncOpenAI(api_key="sk-test", base_url=server.base_url, max_retries=0)
        yield server, client
        await client.close()


async def test_encrypted_content_comes_only_when_included(
    served: tuple[LoopbackResponsesServer, AsyncOpenAI],
) -> None:
    _, client = served
    plain = await client.responses.create(
        model="gpt-5.6-terra", input="add", tools=TOOLS, store=False
    )
    included = await client.responses.create(
        model="gpt-5.6-terra",
        input="add",
        tools=TOOLS,
        store=False,
        include=["reasoning.encrypted_content"],
    )
    assert [o.type for o in plain.output] == ["reasoning", "function_call"]
    assert getattr(plain.output[0], "encrypted_content", None) is None
    assert getattr(included.output[0], "encrypted_content", "").startswith("gAAAAA")


async def test_without_encrypted_content_a_stateless_turn_cannot_go_on(
    served: tuple[LoopbackResponsesServer, AsyncOpenAI],
) -> None:
    server, client = served
    first = await client.responses.create(
        model="gpt-5.6-terra", input="add", tools=TOOLS, store=False
    )
    reasoning, call = (o.to_dict() for o in first.output)
    reasoning, call = cast(Any, reasoning), cast(Any, call)
    answer: Any = {"type": "function_call_output", "call_id": "c1", "output": "1"}
    with pytest.raises(openai.NotFoundError, match="Items are not persisted"):
        await client.responses.create(
            model="gpt-5.6-terra", input=[reasoning, call, answer], tools=TOOLS, store=False
        )
    with pytest.raises(openai.BadRequestError, match="without its required 'reasoning' item"):
        await client.responses.create(
            model="gpt-5.6-terra", input=[call, answer], tools=TOOLS, store=False
        )
    # made with store (its default, true), the item is found by its id alone
    stored = await client.responses.create(model="gpt-5.6-terra", input="add", tools=TOOLS)
    items: Any = [o.to_dict() for o in stored.output]
    assert "encrypted_content" not in items[0]
    with pytest.raises(openai.BadRequestError, match="without its required following item"):
        await client.responses.create(model="gpt-5.6-terra", input=items[:1], tools=TOOLS)
    with pytest.raises(openai.BadRequestError, match="No tool output found for function call c1"):
        await client.responses.create(model="gpt-5.6-terra", input=items, tools=TOOLS)
    ok = await client.responses.create(model="gpt-5.6-terra", input=[*items, answer], tools=TOOLS)
    assert ok.output and [s for s, _ in server.rejected] == [404, 400, 400, 400]


async def test_chat_completions_refuses_tools_while_reasoning_only(
    served: tuple[LoopbackResponsesServer, AsyncOpenAI],
) -> None:
    server, client = served
    messages: Any = [{"role": "user", "content": "add"}]
    tools: Any = [{"type": "function", "function": {"name": "add", "parameters": {}}}]
    with pytest.raises(openai.BadRequestError, match="use /v1/responses or set reasoning_effort"):
        await client.chat.completions.create(model="gpt-5.6-terra", messages=messages, tools=tools)
    none = await client.chat.completions.create(
        model="gpt-5.6-terra", messages=messages, tools=tools, reasoning_effort="none"
    )
    older = await client.chat.completions.create(model="gpt-4.1", messages=messages, tools=tools)
    assert none.choices[0].message.tool_calls and older.choices[0].message.tool_calls
    assert len(server.rejected) == 1
