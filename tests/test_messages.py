"""Messages: the stable JSON form of a conversation round-trips exactly."""

from __future__ import annotations

import json

import pytest

from retinue.messages import (
    AssistantMessage,
    ReasoningPart,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    dumps_conversation,
    from_dict,
    loads_conversation,
    message_text_size,
)

CONVERSATION = [
    SystemMessage("be brief"),
    UserMessage("hé, what is 2+3?"),
    AssistantMessage("", (ToolCall("c1", "add", '{"a": 2, "b": 3}'),)),
    ToolResultMessage("c1", "add", "5"),
    ToolResultMessage("c2", "nope", "Error: unknown", is_error=True),
    AssistantMessage("five"),
]


def test_conversation_round_trips_through_json() -> None:
    text = dumps_conversation(CONVERSATION)
    assert loads_conversation(text) == CONVERSATION
    data = json.loads(text)
    assert data[2] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c1", "name": "add", "arguments": '{"a": 2, "b": 3}'}],
    }
    assert data[4]["is_error"] is True and "is_error" not in data[3]
    assert dumps_conversation(loads_conversation(text)) == text  # stable


def test_unknown_role_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown message role"):
        from_dict({"role": "robot", "content": "x"})


def test_usage_adds_and_text_size_counts_utf8() -> None:
    assert Usage(1, 2, 0, 1) + Usage(10, 20, 5, 1) == Usage(11, 22, 5, 2)
    assert message_text_size([UserMessage("hé")]) == 3


THINKING = ReasoningPart(
    "anthropic", "claude-fable-5-2", "thinking", {"signature": "sig=="}, "Let me add."
)
REDACTED = ReasoningPart("anthropic", "claude-fable-5-2", "redacted_thinking", {"data": "opaque"})


def test_reasoning_parts_round_trip_in_order() -> None:
    message = AssistantMessage("", (ToolCall("c1", "add", "{}"),), (THINKING, REDACTED))
    text = dumps_conversation([message])
    assert loads_conversation(text) == [message]
    assert json.loads(text)[0]["reasoning"] == [
        {
            "provider": "anthropic",
            "model": "claude-fable-5-2",
            "kind": "thinking",
            "data": {"signature": "sig=="},
            "text": "Let me add.",
        },
        {
            "provider": "anthropic",
            "model": "claude-fable-5-2",
            "kind": "redacted_thinking",
            "data": {"data": "opaque"},
            "text": "",
        },
    ]


def test_a_message_without_reasoning_keeps_the_old_form() -> None:
    old = {"role": "assistant", "content": "five"}
    message = from_dict(old)
    assert message == AssistantMessage("five")
    assert isinstance(message, AssistantMessage) and message.reasoning == ()
    assert "reasoning" not in dumps_conversation([message])


def test_messages_with_reasoning_stay_hashable() -> None:
    message = AssistantMessage("x", (), (THINKING,))
    assert hash(message) == hash(AssistantMessage("x", (), (THINKING,)))
