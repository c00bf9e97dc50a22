"""A typed tool: pydantic validates the model's arguments; a bad call is an error result the
model reads, and the run goes on."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from retinue import Agent, ToolContext, ToolResultMessage, tool
from retinue.testing import ScriptedModel, call_tool


class Order(BaseModel):
    item: str
    quantity: int = Field(ge=1, le=10)


@tool
def place_order(
    ctx: ToolContext[dict[str, float]], order: Order, speed: Literal["slow", "fast"]
) -> str:
    """Place an order at the caller's prices."""
    total = ctx.deps[order.item] * order.quantity
    return f"{order.quantity} x {order.item} ({speed}): {total:.2f}"


def test_a_typed_tool_gets_valid_arguments_or_the_model_reads_why_not(tmp_path: Path) -> None:
    model = ScriptedModel([
        call_tool("place_order", {"order": {"item": "tea", "quantity": 40}, "speed": "fast"}),
        call_tool("place_order", {"order": {"item": "tea", "quantity": 2}, "speed": "fast"}),
        "Ordered.",
    ])  # fmt: skip
    with Agent(model, workspace=tmp_path, tools=[place_order], builtin_tools=False,
               memory=False) as agent:  # fmt: skip
        out = agent.run_sync("Two teas, fast.", deps={"tea": 1.25})
    assert out.content == "Ordered." and out.output == "Ordered."
    [spec] = model.calls[0].tools
    assert set(spec.parameters["properties"]) == {"order", "speed"}  # no ctx: it is not shown
    refused, done = model.calls[1].messages[-1], model.calls[2].messages[-1]
    assert isinstance(refused, ToolResultMessage) and refused.is_error
    assert "quantity" in refused.content and "10" in refused.content
    assert isinstance(done, ToolResultMessage) and done.content == "2 x tea (fast): 2.50"
