"""The wire conversions are plain functions: tested here without any I/O."""

from __future__ import annotations

import json

from retinue.llm import _anthropic_wire, _openai_wire
from retinue.llm._errors import ProviderInfo, is_context_length, status_error
from retinue.llm._openai_wire import ToolCallAssembler, messages_from_openai
from retinue.llm.base import ToolSpec
from retinue.llm.openai import build_request
from retinue.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)


def long_history(turns: int) -> list[Message]:
    history: list[Message] = [SystemMessage("You are a helpful agent.")]
    for i in range(turns):
        history += [
            UserMessage(f"question {i} — ünïcode"),
            AssistantMessage("", (ToolCall(f"c{i}", "Read", json.dumps({"path": f"f{i}"})),)),
            ToolResultMessage(f"c{i}", "Read", f"contents of f{i}"),
            AssistantMessage(f"answer {i}"),
        ]
    return history


def test_openai_request_of_a_long_history() -> None:
    history = long_history(100)
    body = build_request("m", history, [ToolSpec("Read", "read a file")], stream=False)
    wire = body["messages"]
    assert len(wire) == 401
    assert wire[0] == {"role": "system", "content": "You are a helpful agent."}
    assert wire[2] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c0",
                "type": "function",
                "function": {"name": "Read", "arguments": '{"path": "f0"}'},
            }
        ],
    }
    assert wire[3] == {"role": "tool", "tool_call_id": "c0", "content": "contents of f0"}
    assert wire[-1] == {"role": "assistant", "content": "answer 99"}
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "Read",
                "description": "read a file",
                "parameters": {"type": "object"},
            },
        }
    ]
    json.dumps(body)  # serialisable as is


def test_openai_wire_round_trips() -> None:
    history = long_history(20)
    assert messages_from_openai(_openai_wire.messages_to_openai(history)) == history


def test_openai_reverse_accepts_content_parts_and_developer_role() -> None:
    wire = [
        {"role": "developer", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
    ]
    assert messages_from_openai(wire) == [SystemMessage("be brief"), UserMessage("ab")]


def test_streamed_tool_call_deltas_are_assembled_by_index() -> None:
    calls = ToolCallAssembler()
    calls.add(0, "c1", "add", "")
    calls.add(1, "c2", "look", None)
    calls.add(0, None, None, '{"a": ')
    calls.add(1, None, "up", '{"q"')
    calls.add(0, None, None, "1}")
    calls.add(1, None, None, ': "x"}')
    calls.add(2, "c3", "noargs", None)
    assert calls.calls() == (
        ToolCall("c1", "add", '{"a": 1}'),
        ToolCall("c2", "lookup", '{"q": "x"}'),
        ToolCall("c3", "noargs", "{}"),
    )


def test_anthropic_request_of_a_long_history() -> None:
    history = [*long_history(50), SystemMessage("a late system note")]
    body = _anthropic_wire.build_request("c", history, [], max_tokens=100, stream=False)
    system, wire = body["system"], body["messages"]
    assert [b["text"] for b in system] == ["You are a helpful agent.", "a late system note"]
    assert "cache_control" not in system[0] and system[1]["cache_control"] == {"type": "ephemeral"}
    assert len(wire) == 200
    assert [m["role"] for m in wire[:4]] == ["user", "assistant", "user", "assistant"]
    assert wire[1]["content"] == [
        {"type": "tool_use", "id": "c0", "name": "Read", "input": {"path": "f0"}}
    ]
    assert wire[2]["content"][0]["type"] == "tool_result"
    assert wire[-1]["content"] == [
        {"type": "text", "text": "answer 49", "cache_control": {"type": "ephemeral"}}
    ]
    cached = [b for m in wire for b in m["content"] if "cache_control" in b]
    assert len(cached) == 1


def test_anthropic_prefix_is_byte_stable_across_turns() -> None:
    history = long_history(10)
    first = _anthropic_wire.build_request("c", history, [], max_tokens=100, stream=False)
    later = _anthropic_wire.build_request(
        "c", [*history, UserMessage("next")], [], max_tokens=100, stream=False
    )
    # Everything but the moved cache breakpoint is identical.
    before = first["messages"][:-1]
    assert later["messages"][: len(before)] == before
    assert later["system"] == first["system"]


def test_anthropic_malformed_arguments_still_form_an_object() -> None:
    assert _anthropic_wire.tool_input('{"a": 1,') == {"_raw_arguments": '{"a": 1,'}
    assert _anthropic_wire.tool_input("[1]") == {"_value": [1]}
    assert _anthropic_wire.tool_input("") == {}


def test_anthropic_drops_an_empty_reply_and_merges_user_turns() -> None:
    history = [UserMessage("a"), AssistantMessage(""), UserMessage("b")]
    _, wire = _anthropic_wire.messages_to_anthropic(history)
    assert len(wire) == 1 and [b["text"] for b in wire[0]["content"]] == ["a", "b"]


def test_context_length_detection() -> None:
    assert is_context_length(400, "whatever", "context_length_exceeded")
    assert is_context_length(400, "This model's maximum context length is 8192 tokens", "")
    assert is_context_length(400, "prompt is too long: 250000 tokens > 200000 maximum", "")
    assert not is_context_length(400, "invalid tool schema", "invalid_request_error")
    assert not is_context_length(500, "maximum context length", "")


def test_status_errors_are_one_line_and_name_the_setting() -> None:
    info = ProviderInfo("openai", "OPENAI_API_KEY", "OPENAI_BASE_URL", "http://h/v1", 2)
    body = {"error": {"message": "bad\nkey", "code": "invalid_api_key"}}
    assert "OPENAI_API_KEY" in str(status_error(info, 403, body, ""))
    assert "\n" not in str(status_error(info, 403, body, ""))
    assert "OPENAI_BASE_URL" in str(status_error(info, 404, {}, "no such model"))
    unretried = ProviderInfo("openai", "K", "U", "http://h/v1", 0)
    assert "retries" not in str(status_error(unretried, 500, {}, "boom"))
