"""Typed results at two levels: the main agent's and a sub-agent's, validated, retried."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path

import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict  # (pydantic needs it before Python 3.12)

from retinue import Agent, ConfigError, Event, OutputValidationError, Role, RoleError
from retinue.events import RUN_FINISHED
from retinue.messages import AssistantMessage, ToolResultMessage
from retinue.testing import ScriptedModel, call_tool, final_result


class Finding(BaseModel):
    claim: str
    confidence: float


class Summary(BaseModel):
    headline: str
    findings: int


ANALYST = Role(
    name="analyst",
    description="Checks one claim",
    prompt="You check claims.",
    tools=(),
    output_type=Finding,
)


def agent(model: ScriptedModel, tmp_path: Path, **kwargs: object) -> Agent:
    return Agent(model, workspace=tmp_path, home=tmp_path / "home", builtin_tools=False,
                 memory=False, **kwargs)  # type: ignore[arg-type]  # fmt: skip


def test_typed_output_at_two_levels(tmp_path: Path) -> None:
    model = ScriptedModel([
        call_tool("SubAgent", {"task": "check: the sky is blue", "role": "analyst"}),
        final_result({"claim": "the sky is blue", "confidence": 0.9}),
        final_result({"headline": "One claim holds", "findings": 1}),
    ])  # fmt: skip
    with agent(model, tmp_path, roles=[ANALYST], output_type=Summary) as a:
        out = a.run_sync("Check the claim.")
    model.assert_done()
    assert out.output == Summary(headline="One claim holds", findings=1)
    assert json.loads(out.content) == {"headline": "One claim holds", "findings": 1}
    assert out.outputs(Finding) == [Finding(claim="the sky is blue", confidence=0.9)]
    [typed] = out.subagent_outputs
    assert typed.role == "analyst" and typed.agent_id.startswith("main/analyst")
    # the parent model read the sub-agent's answer as JSON, and both levels had the tool
    result = model.calls[2].messages[-1]
    assert isinstance(result, ToolResultMessage) and result.name == "SubAgent"
    assert json.loads(result.content) == {"claim": "the sky is blue", "confidence": 0.9}
    assert "final_result" in model.calls[0].tool_names
    assert model.calls[1].tool_names == ["final_result"]
    schema = next(t for t in model.calls[1].tools if t.name == "final_result").parameters
    assert set(schema["required"]) == {"claim", "confidence"}


def test_a_wrong_answer_is_shown_its_errors_and_tried_again(tmp_path: Path) -> None:
    model = ScriptedModel([
        final_result({"headline": "x", "findings": "many"}),
        "Just some prose.",
        final_result({"headline": "x", "findings": 2}),
    ])  # fmt: skip
    with agent(model, tmp_path, output_type=Summary) as a:
        out = a.run_sync("Summarise.")
    assert out.output == Summary(headline="x", findings=2)
    first_error = model.calls[1].messages[-1]
    assert isinstance(first_error, ToolResultMessage) and first_error.is_error
    assert "findings" in first_error.content and "integer" in first_error.content
    prose_error = model.calls[2].messages[-1]
    assert "final_result" in prose_error.content
    assert isinstance(out.messages[-1], AssistantMessage)  # the history ends valid


def test_retries_are_bounded_then_a_typed_error(tmp_path: Path) -> None:
    model = ScriptedModel([final_result({"headline": 1})] * 3)
    with agent(model, tmp_path, output_type=Summary, output_retries=2) as a:
        conversation = a.conversation()
        with pytest.raises(OutputValidationError) as caught:
            asyncio.run(conversation.send("Summarise."))
    message = str(caught.value)
    assert "\n" not in message and "3 tries" in message and "findings" in caught.value.errors
    assert model.call_count == 3
    assert conversation.messages[1].content == "Summarise."  # nothing lost


def test_a_plain_json_answer_counts_and_other_kinds_of_type(tmp_path: Path) -> None:
    @dataclasses.dataclass
    class Point:
        x: int
        y: int

    class Pair(TypedDict):
        left: str
        right: str

    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    cases: list[tuple[object, str, object]] = [
        (Point, '```json\n{"x": 1, "y": 2}\n```', Point(1, 2)),
        (Pair, '{"left": "a", "right": "b"}', {"left": "a", "right": "b"}),
        (schema, '{"n": 7}', {"n": 7}),
    ]
    for output_type, answer, expected in cases:
        model = ScriptedModel([answer])
        with agent(model, tmp_path, output_type=output_type) as a:
            assert a.run_sync("Go.").output == expected
    bad = ScriptedModel(['{"n": "seven"}', '{"n": 7}'])
    with agent(bad, tmp_path, output_type=schema) as a:
        assert a.run_sync("Go.").output == {"n": 7}
    assert "'seven' is not of type 'integer'" in bad.calls[1].messages[-1].content


@pytest.mark.parametrize(
    "output_type", [int, "Report", {"type": "string"}, {"type": "object", "properties": 3}]
)
def test_an_output_type_no_path_can_honour_is_one_line_before_any_call(
    tmp_path: Path, output_type: object
) -> None:
    model = ScriptedModel(["never asked"])
    with pytest.raises(ConfigError) as caught:
        agent(model, tmp_path, output_type=output_type)
    assert "\n" not in str(caught.value) and "output" in str(caught.value)
    role = Role(name="r", description="d", prompt="p", tools=(), output_type=output_type)
    with pytest.raises(RoleError) as caught_role, agent(model, tmp_path, roles=[role]) as a:
        a.run_sync("hi")
    assert "\n" not in str(caught_role.value) and "'r'" in str(caught_role.value)
    assert model.call_count == 0 and model.remaining == 1  # nothing asked, nothing lost


def test_a_role_file_declares_its_output_schema(tmp_path: Path) -> None:
    agents = tmp_path / ".retinue" / "agents"
    agents.mkdir(parents=True)
    (agents / "scorer.md").write_text(
        "---\nname: scorer\ndescription: Scores an essay\ntools: []\n"
        "outputSchema:\n  type: object\n  properties:\n    score: {type: integer}\n"
        "  required: [score]\n---\nYou score essays.\n"
    )
    (agents / "broken.md").write_text(
        "---\nname: broken\ndescription: Bad schema\noutputSchema: [1, 2]\n---\nx\n"
    )
    model = ScriptedModel([
        call_tool("SubAgent", {"task": "score it", "role": "scorer"}),
        final_result({"score": "high"}),
        final_result({"score": 8}),
        "It scored 8.",
    ])  # fmt: skip
    with Agent(model, workspace=tmp_path, home=tmp_path / "home", memory=False) as a:
        out = a.run_sync("Score the essay.")
        problems = {p.path.name: p.reason for p in a.runtime.catalog.problems}
    assert out.content == "It scored 8."
    assert out.subagent_outputs[0].output == {"score": 8}
    assert json.loads(model.calls[3].messages[-1].content) == {"score": 8}
    assert "'outputSchema' must be a mapping" in problems["broken.md"]


def test_an_interactive_typed_sub_agent_answers_each_turn_in_json(tmp_path: Path) -> None:
    events: list[Event] = []
    model = ScriptedModel([
        call_tool("SubAgent", {"task": "check a", "role": "analyst", "interactive": True}),
        final_result({"claim": "a", "confidence": 0.5}),
        call_tool("SubAgent", {"task": "check b", "role": "analyst", "interactive": True}),
        final_result({"claim": "b", "confidence": 1}),
        "Both checked.",
    ])  # fmt: skip
    with agent(model, tmp_path, roles=[ANALYST], on_event=events.append) as a:
        out = a.run_sync("Check a, then b.")
    model.assert_done()
    assert out.outputs(Finding) == [Finding(claim="a", confidence=0.5),
                                    Finding(claim="b", confidence=1.0)]  # fmt: skip
    second_reply = model.calls[4].messages[-1].content
    assert '{"claim":"b","confidence":1.0}' in second_reply  # JSON, in the session's note
    finished = [e for e in events if e.kind == RUN_FINISHED and "output" in e.data]
    assert [e.data["output"] for e in finished] == [
        {"claim": "a", "confidence": 0.5},
        {"claim": "b", "confidence": 1.0},
    ]  # the events carry JSON data (what SSE and the other surfaces send)
    assert json.dumps([e.to_dict() for e in finished])
