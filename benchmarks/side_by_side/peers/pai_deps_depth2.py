# pyright: reportMissingImports=false, reportAttributeAccessIssue=false
"""Deps at depth 2 in pydantic-ai: the delegating tool passes ctx.deps on by hand."""

# ruff: noqa: E402
# --- setup (not counted) ---
from _pai import call, scripted

MODEL = scripted(
    call("ask_clerk", {"question": "What does tea cost?"}),
    call("price", {"item": "tea"}),
    "Tea costs 1.5.",
    "The clerk says tea costs 1.5.",
)
# --- task --- (counted; shown in docs/explanation/side-by-side.md)
# --8<-- [start:task]
from dataclasses import dataclass

from pydantic_ai import Agent, RunContext


@dataclass
class Shop:
    prices: dict[str, float]


clerk = Agent(MODEL, deps_type=Shop, instructions="Answer with the price.")


@clerk.tool
def price(ctx: RunContext[Shop], item: str) -> float:
    """The price of one item."""
    return ctx.deps.prices[item]


agent = Agent(MODEL, deps_type=Shop)


@agent.tool
async def ask_clerk(ctx: RunContext[Shop], question: str) -> str:
    """Ask the clerk, who looks up prices."""
    return (await clerk.run(question, deps=ctx.deps, usage=ctx.usage)).output


print(agent.run_sync("Ask the clerk what tea costs", deps=Shop({"tea": 1.5})).output)
# --8<-- [end:task]
# --- check (not counted) ---
assert MODEL.seen[2][-1].parts[0].content == 1.5
