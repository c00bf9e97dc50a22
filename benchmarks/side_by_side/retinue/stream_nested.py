"""Streaming text of a nested sub-agent, tagged with who wrote it."""
# ruff: noqa: E402  (the setup comes before the task and its imports)

# --- setup (not counted): a data directory of its own and a scripted model ---
from _setup import scripted

from retinue.testing import call_tool

MODEL = scripted(
    call_tool("SubAgent", {"task": "Draft a haiku", "role": "writer"}),
    "Old pond, a frog jumps",
    "Here is the writer's haiku.",
)
SEEN = []
# --- task --- (counted; shown in docs/explanation/side-by-side.md)
# --8<-- [start:task]
import asyncio

from retinue import Agent, Role, TextDelta

writer = Role("writer", "Writes short poems", "Write the poem asked for.", ())
agent = Agent(MODEL, roles=[writer])


async def main() -> None:
    async for event in agent.stream("Have the writer draft a haiku"):
        if isinstance(event, TextDelta):
            print(event.agent_id, event.text)
            SEEN.append((event.agent_id, event.text))  # (not counted: for the check)


asyncio.run(main())
# --8<-- [end:task]
# --- check (not counted) ---
assert [text for _, text in SEEN] == ["Old pond, a frog jumps", "Here is the writer's haiku."]
assert SEEN[0][0].startswith("main/writer") and SEEN[1][0] == "main"
