"""OpenAI Responses answers a typed run natively (strict ``text.format``), beside its tools,
and no request body holds the run's deps; a schema strict mode cannot take keeps the tool."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel

from retinue import Agent, ToolContext, ToolSpec, tool
from retinue.llm._structured import native_output, strict_schema
from retinue.llm.loopback_responses import LoopbackResponsesServer
from retinue.llm.openai_responses import OpenAIResponsesModel
from retinue.testing import ScriptedModel, call_tool

SECRET = "deps-secret-5e1d"


class Weather(BaseModel):
    city: str
    celsius: float


class Forecast(BaseModel):
    city: str
    note: str | None = None  # optional: strict mode cannot say so


@tool
def thermometer(ctx: ToolContext[dict[str, str]], city: str) -> str:
    """Read the thermometer of a city."""
    return "21.5" if ctx.deps["key"] == SECRET else "no access"


async def test_responses_gets_a_strict_format_and_the_typed_answer_comes_back(
    tmp_path: Path,
) -> None:
    script = ScriptedModel([
        call_tool("thermometer", {"city": "Oslo"}),
        '{"city": "Oslo", "celsius": 21.5}',
    ])  # fmt: skip
    with LoopbackResponsesServer(script) as server:
        model = OpenAIResponsesModel("gpt-5.6-terra", base_url=server.base_url, max_retries=0)
        agent = Agent(model, workspace=tmp_path, tools=[thermometer], builtin_tools=False,
                      memory=False, output_type=Weather)  # fmt: skip
        with agent:
            out = await agent.run("How warm is Oslo?", deps={"key": SECRET})
        await model.aclose()
    script.assert_done()
    assert server.rejected == []
    assert out.output == Weather(city="Oslo", celsius=21.5)
    first = server.requests[0]
    assert [t["name"] for t in first["tools"]] == ["thermometer"]  # no final_result tool
    text_format = first["text"]["format"]
    assert text_format["type"] == "json_schema" and text_format["strict"] is True
    assert text_format["schema"]["additionalProperties"] is False
    assert set(text_format["schema"]["required"]) == {"city", "celsius"}
    assert script.calls[1].messages[-1].content == "21.5"  # the tool had the deps
    assert SECRET not in json.dumps(server.requests)  # never in a request body


def test_a_schema_strict_mode_cannot_take_keeps_the_final_result_tool() -> None:
    optional = ToolSpec("final_result", "", Forecast.model_json_schema())
    other = ToolSpec("thermometer", "", {"type": "object", "properties": {}})
    assert native_output([other, optional]) == ([other, optional], None)
    assert native_output([other]) == ([other], None)
    open_object = {"type": "object", "properties": {}, "additionalProperties": True}
    assert strict_schema(open_object) is None
    nested = {
        "type": "object",
        "properties": {"at": {"$ref": "#/$defs/Place"}},
        "required": ["at"],
        "$defs": {"Place": {"type": "object", "properties": {"x": {"type": "number"}},
                            "required": ["x"]}},
    }  # fmt: skip
    made = strict_schema(nested)
    assert made is not None and made["$defs"]["Place"]["additionalProperties"] is False
    assert "additionalProperties" not in nested["$defs"]["Place"]  # the original is kept
