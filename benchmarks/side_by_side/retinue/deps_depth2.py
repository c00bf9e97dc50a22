"""Deps at depth 2: a per-run object reaches the tool a sub-agent calls."""
# ruff: noqa: E402  (the setup comes before the task and its imports)

# --- setup (not counted): a data directory of its own and a scripted model ---
from _setup import scripted

from retinue.testing import call_tool

MODEL = scripted(
    call_tool("SubAgent", {"task": "What does tea cost?", "role": "clerk"}),
    call_tool("price", {"item": "tea"}),
    "Tea costs 1.5.",
    "The clerk says tea costs 1.5.",
)
# --- task --- (counted; shown in docs/explanation/side-by-side.md)
# --8<-- [start:task]
from dataclasses import dataclass

from retinue import Agent, Role, ToolContext, tool


@dataclass
class Shop:
    prices: dict[str, float]


@tool
def price(ctx: ToolContext[Shop], item: str) -> float:
    """The price of one item."""
    return ctx.deps.prices[item]


clerk = Role("clerk", "Looks up prices", "Answer with the price.", ("price",))
agent = Agent(MODEL, tools=[price], roles=[clerk], deps_type=Shop)
print(agent.run_sync("Ask the clerk what tea costs", deps=Shop({"tea": 1.5})).content)
# --8<-- [end:task]
# --- check (not counted) ---
assert any(c.messages[-1].content == "1.5" for c in MODEL.calls)  # the tool's result
