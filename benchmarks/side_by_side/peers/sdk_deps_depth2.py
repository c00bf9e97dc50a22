# pyright: reportMissingImports=false, reportAttributeAccessIssue=false
"""Deps at depth 2 in the OpenAI Agents SDK: the run's context reaches an agent-as-tool's tools."""

# ruff: noqa: E402
# --- setup (not counted) ---
from _sdk import Scripted, call

MODEL = Scripted(
    call("clerk", {"input": "What does tea cost?"}),
    call("price", {"item": "tea"}),
    "Tea costs 1.5.",
    "The clerk says tea costs 1.5.",
)
# --- task --- (counted; shown in docs/explanation/side-by-side.md)
# --8<-- [start:task]
from dataclasses import dataclass

from agents import Agent, RunContextWrapper, Runner, function_tool


@dataclass
class Shop:
    prices: dict[str, float]


@function_tool
def price(ctx: RunContextWrapper[Shop], item: str) -> float:
    """The price of one item."""
    return ctx.context.prices[item]


clerk = Agent("clerk", instructions="Answer with the price.", tools=[price], model=MODEL)
agent = Agent("lead", tools=[clerk.as_tool("clerk", "Looks up prices")], model=MODEL)
print(
    Runner.run_sync(agent, "Ask the clerk what tea costs", context=Shop({"tea": 1.5})).final_output
)
# --8<-- [end:task]
# --- check (not counted) ---
assert any(
    i.get("output") == "1.5" for _, sent in MODEL.seen if isinstance(sent, list) for i in sent
)
