# pyright: reportMissingImports=false, reportAttributeAccessIssue=false
"""Streaming text of a nested sub-agent in pydantic-ai: the delegating tool streams the
sub-agent itself; the outer stream carries only the parent's text."""

# ruff: noqa: E402
# --- setup (not counted) ---
from _pai import call, scripted

MODEL = scripted(
    call("ask_writer", {"task": "Draft a haiku"}),
    "Old pond, a frog jumps",
    "Here is the writer's haiku.",
)
SEEN = []
# --- task --- (counted; shown in docs/explanation/side-by-side.md)
# --8<-- [start:task]
import asyncio

from pydantic_ai import Agent, RunContext

writer = Agent(MODEL, instructions="Write the poem asked for.")
agent = Agent(MODEL)


@agent.tool
async def ask_writer(ctx: RunContext, task: str) -> str:
    """Ask the writer, who writes short poems."""
    async with writer.run_stream(task, usage=ctx.usage) as result:
        async for text in result.stream_text(delta=True):
            print("writer", text)
            SEEN.append(("writer", text))  # (not counted: for the check)
        return await result.get_output()


async def main() -> None:
    async with agent.run_stream("Have the writer draft a haiku") as result:
        async for text in result.stream_text(delta=True):
            print("main", text)
            SEEN.append(("main", text))  # (not counted: for the check)


asyncio.run(main())
# --8<-- [end:task]
# --- check (not counted) ---
assert "".join(t for who, t in SEEN if who == "writer").strip() == "Old pond, a frog jumps"
assert "".join(t for who, t in SEEN if who == "main").strip() == "Here is the writer's haiku."
