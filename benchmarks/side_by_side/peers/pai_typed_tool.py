# pyright: reportMissingImports=false, reportAttributeAccessIssue=false
"""Typed tool in pydantic-ai."""

# ruff: noqa: E402
# --- setup (not counted) ---
from _pai import call, scripted

MODEL = scripted(call("add", {"a": 2, "b": 3}), "2 + 3 = 5")
# --- task --- (counted; shown in docs/explanation/side-by-side.md)
# --8<-- [start:task]
from pydantic_ai import Agent

agent = Agent(MODEL)


@agent.tool_plain
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


print(agent.run_sync("What is 2 + 3?").output)
# --8<-- [end:task]
# --- check (not counted) ---
assert MODEL.seen[1][-1].parts[0].content == 5
