"""Malformed provider answers become one-line ``ModelError``s; content-part lists are text."""

from __future__ import annotations

import json
from typing import Any

import pytest
from anthropic.types import TextBlock, ToolUseBlock

from retinue.errors import ModelError
from retinue.llm._anthropic_wire import reply_from_anthropic
from retinue.llm.openai import _from_completion, _json_body


def completion(message: Any) -> dict[str, Any]:
    return {"choices": [{"message": message, "finish_reason": "stop"}]}


def call(function: Any, id: Any = "c1") -> dict[str, Any]:
    return {"id": id, "type": "function", "function": function}


OPENAI_MALFORMED = {
    "arguments as an object": {"tool_calls": [call({"name": "Read", "arguments": {"a": 1}})]},
    "name as a number": {"tool_calls": [call({"name": 42, "arguments": "{}"})]},
    "tool_calls as a number": {"content": "hi", "tool_calls": 3},
    "message as a string": "just text",
    "a tool call as a string": {"tool_calls": ["Read"]},
    "content as a number": {"content": 7},
    "id as a list": {"tool_calls": [call({"name": "Read", "arguments": "{}"}, id=[1])]},
}


@pytest.mark.parametrize("message", OPENAI_MALFORMED.values(), ids=OPENAI_MALFORMED.keys())
def test_openai_malformed_answers_are_one_line_model_errors(message: Any) -> None:
    with pytest.raises(ModelError) as info:
        _from_completion(completion(message))
    text = str(info.value)
    assert text.startswith("openai: malformed answer: ")
    assert "\n" not in text


def test_openai_choices_that_are_not_a_list() -> None:
    with pytest.raises(ModelError, match="without choices"):
        _from_completion({"choices": "nope"})


def test_openai_content_part_list_is_joined_as_text() -> None:
    parts = [
        {"type": "text", "text": "Hello, "},
        {"type": "image_url"},
        {"type": "text", "text": "world"},
    ]
    reply = _from_completion(completion({"content": parts})).message
    assert reply.content == "Hello, world"


def test_openai_well_formed_tool_call_still_parses() -> None:
    reply = _from_completion(
        completion({"tool_calls": [call({"name": "Read", "arguments": '{"a":1}'})]})
    )
    (tc,) = reply.message.tool_calls
    assert (tc.id, tc.name, tc.arguments) == ("c1", "Read", '{"a":1}')


ANTHROPIC_MALFORMED = {
    "content as a string": "hello",
    "name as a number": [{"type": "tool_use", "id": "t1", "name": 5, "input": {}}],
    "input as a string": [{"type": "tool_use", "id": "t1", "name": "Read", "input": "{}"}],
    "text as a list": [{"type": "text", "text": ["a"]}],
}


@pytest.mark.parametrize("content", ANTHROPIC_MALFORMED.values(), ids=ANTHROPIC_MALFORMED.keys())
def test_anthropic_malformed_answers_are_one_line_model_errors(content: Any) -> None:
    with pytest.raises(ModelError) as info:
        reply_from_anthropic(content)
    assert str(info.value).startswith("anthropic: malformed answer: ")
    assert "\n" not in str(info.value)


def test_anthropic_sdk_blocks_parse() -> None:
    blocks = [
        TextBlock(type="text", text="a"),
        ToolUseBlock(type="tool_use", id="t1", name="Read", input={"file_path": "x"}),
        {"type": "thinking", "thinking": "unsigned: skipped"},
        {"type": "thinking", "thinking": "kept", "signature": "s1"},
        {"type": "redacted_thinking", "data": 7},
        {"type": "text", "text": "b"},
    ]
    reply = reply_from_anthropic(blocks, "claude-x")
    assert reply.content == "ab"
    assert [(p.kind, p.text, p.data, p.model) for p in reply.reasoning] == [
        ("thinking", "kept", {"signature": "s1"}, "claude-x")
    ]
    assert [(t.id, t.name, t.arguments) for t in reply.tool_calls] == [
        ("t1", "Read", '{"file_path": "x"}')
    ]


ANSWER_BODIES = [
    b'{"a": 1}',
    b'{"a": 1}  \r\n\t',
    b' \n{"a": "\xc3\xa9"}',
    b'\xef\xbb\xbf{"a": 1}',  # UTF-8 byte order mark
    '{"a": "é"}'.encode("utf-16"),
    '{"a": 1}'.encode("utf-32-le"),
    b'{"a": "\\ud800"}',  # a lone surrogate, escaped
    b'{"a": "\xed\xa0\x80"}',  # and raw (json.loads lets it pass)
    b'{"a": 1} x',
    b'{"a": 1}{"b": 2}',
    b'{"a": 1}\xc2\xa0',  # a non-breaking space: not JSON whitespace
    b'{"a": \xff}',
    b"{",
    b"[1, 2]",
    b"",
]


@pytest.mark.parametrize("body", ANSWER_BODIES)
def test_an_answer_body_is_read_as_json_loads_reads_it(body: bytes) -> None:
    """The quick reading of an answer body agrees with ``json.loads``: the same object, or
    a one-line ``ModelError`` where ``json.loads`` fails or gives no object."""
    try:
        expected = json.loads(body)
    except ValueError:
        expected = None
    if isinstance(expected, dict):
        assert _json_body(body) == expected
    else:
        with pytest.raises(ModelError, match=r"not JSON|not a JSON object"):
            _json_body(body)
