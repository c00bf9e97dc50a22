"""The pause value (:mod:`retinue.engine.pause`): the last step's open calls found in one
place, a stored history read back as what it waits on, and the value's JSON form, bounded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from retinue.engine import RunConfig
from retinue.engine.pause import (
    MAX_PAUSED_APPROVALS,
    Paused,
    PendingApproval,
    Question,
    asking,
    open_calls,
    stored_pause,
)
from retinue.engine.session import Session
from retinue.messages import AssistantMessage, Message, ToolCall, ToolResultMessage, UserMessage
from retinue.policy.approvals import ApprovalRequest
from retinue.subagents.tools import ask_parent
from retinue.testing import ScriptedModel, call_tool
from retinue.tools import ToolContext, ToolRegistry

ASK = ToolCall("a1", "AskParent", '{"question": "Which port?"}')
WRITE = ToolCall("w1", "Write", '{"file_path": "x"}')


def request_for(call: ToolCall, depth: int = 0) -> ApprovalRequest:
    return ApprovalRequest("r-" + call.id, "main", "", depth, call.name, call.arguments,
                           "writes", "", call_id=call.id)  # fmt: skip


def test_open_calls_are_the_last_steps_calls_without_a_result() -> None:
    history: list[Message] = [
        UserMessage("go"),
        AssistantMessage("", (WRITE,)),
        ToolResultMessage("w1", "Write", "ok"),
        AssistantMessage("", (ASK, ToolCall("r1", "Read"))),
        ToolResultMessage("r1", "Read", "text"),
    ]
    assert open_calls(history) == [ASK]
    assert open_calls([*history, AssistantMessage("done")]) == []
    assert open_calls([UserMessage("go")]) == []


def test_a_stored_history_ending_on_a_question_is_paused_on_it() -> None:
    history: list[Message] = [UserMessage("go"), AssistantMessage("", (ASK,))]
    assert stored_pause(history) == Paused(Question(ASK, "Which port?"))
    both: list[Message] = [UserMessage("go"), AssistantMessage("", (ASK, WRITE))]
    assert stored_pause(both) is None  # another call open too: not a question alone
    no_text = ToolCall("a2", "AskParent", '{"question": "  "}')
    assert stored_pause([UserMessage("go"), AssistantMessage("", (no_text,))]) is None


def test_stored_approvals_pause_only_when_each_finds_its_open_call() -> None:
    history: list[Message] = [UserMessage("go"), AssistantMessage("", (WRITE,))]
    paused = stored_pause(history, [request_for(WRITE).to_dict()])
    assert paused == Paused(approvals=(PendingApproval(WRITE, request_for(WRITE)),))
    assert paused is not None and paused.calls == {"w1"}
    other = request_for(ToolCall("zz", "Write"))
    assert stored_pause(history, [other.to_dict()]) is None
    assert stored_pause(history, [request_for(WRITE, depth=1).to_dict()]) is None
    assert stored_pause(history, [{"id": "r", "junk": 1}]) is None


def test_an_old_stored_request_row_is_still_read() -> None:
    """A request row as today's service stores it (before the pause value existed), with a
    field a later version may drop: it is read, unknown keys left out."""
    row: dict[str, Any] = {
        "id": "3f2a", "agent_id": "conv-c1", "role": "", "depth": 0, "tool": "Write",
        "arguments": '{"file_path": "x"}', "reason": "writes a file", "rule": "Write(x)",
        "call_id": "w1", "digest": "", "from_a_later_version": True,
    }  # fmt: skip
    history: list[Message] = [UserMessage("go"), AssistantMessage("", (WRITE,))]
    paused = stored_pause(history, [row])
    assert paused is not None and [r.id for r in paused.requests] == ["3f2a"]


def test_the_value_goes_to_json_and_back() -> None:
    paused = Paused(Question(ASK, "Which port?"), (PendingApproval(WRITE, request_for(WRITE)),))
    text = json.dumps(paused.to_dict())
    assert Paused.from_dict(json.loads(text)) == paused
    assert Paused.from_dict(Paused().to_dict()) == Paused()


@pytest.mark.parametrize(
    "data",
    [
        {"question": "not an object"},
        {"question": {"call": {"id": "a", "name": "AskParent", "arguments": "{}"}, "text": ""}},
        {"question": {"call": {"id": 1, "name": "AskParent", "arguments": "{}"}, "text": "q"}},
        {"question": {"call": {"id": "a", "name": "x", "arguments": "x" * 200_000}, "text": "q"}},
        {"approvals": "nope"},
        {"approvals": [{"call": {"id": "w1", "name": "Write", "arguments": "{}"}}]},
        {"approvals": [{}] * (MAX_PAUSED_APPROVALS + 1)},
    ],
)
def test_a_bad_or_oversized_pause_is_refused_when_read_back(data: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        Paused.from_dict(data)


def test_a_request_that_names_another_call_is_refused() -> None:
    data = Paused(approvals=(PendingApproval(WRITE, request_for(WRITE)),)).to_dict()
    data["approvals"][0]["call"]["id"] = "other"
    with pytest.raises(ValueError, match="does not name its call"):
        Paused.from_dict(data)


async def test_a_turn_that_asks_ends_with_its_pause(tmp_path: Path) -> None:
    model = ScriptedModel([call_tool("AskParent", {"question": "Which port?"}), "On 8080."])
    config = RunConfig(model, [], ToolRegistry([ask_parent]), ToolContext("main", tmp_path,
                                                                          tmp_path))  # fmt: skip
    session = Session("main", config)
    out = await session.send("set it up")
    assert out.asking and out.paused is not None and out.paused.question is not None
    assert out.paused.question.text == "Which port?"
    assert asking(session.messages, "Which port?") == out.paused.question
    assert out.paused.question.call.id in {c.id for c in open_calls(session.messages)}
    done = await session.send("8080")
    assert done.content == "On 8080." and done.paused is None and session.paused is None
    await session.close()
