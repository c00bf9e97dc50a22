"""Typed tool: a typed function the model calls."""
# ruff: noqa: E402  (the setup comes before the task and its imports)

# --- setup (not counted): a data directory of its own and a scripted model ---
from _setup import scripted

from retinue.testing import call_tool

MODEL = scripted(call_tool("add", {"a": 2, "b": 3}), "2 + 3 = 5")
# --- task --- (counted; shown in docs/explanation/side-by-side.md)
# --8<-- [start:task]
from retinue import Agent, tool


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


agent = Agent(MODEL, tools=[add])
print(agent.run_sync("What is 2 + 3?").content)
# --8<-- [end:task]
# --- check (not counted) ---
assert MODEL.calls[1].messages[-1].content == "5"
assert "add" in MODEL.calls[0].tool_names
