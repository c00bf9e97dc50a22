"""Saved and resumed conversation: saved after each turn, resumed by id with new instructions."""
# ruff: noqa: E402  (the setup comes before the task and its imports)

# --- setup (not counted): a data directory of its own and a scripted model ---
from _setup import scripted

MODEL = scripted("Sorry to hear that.", "It ships today; here is a refund.")
# --- task --- (counted; shown in docs/explanation/side-by-side.md)
# --8<-- [start:task]
import asyncio

from retinue import Agent

monday = Agent(MODEL, instructions="You are a support agent.")
asyncio.run(monday.conversation("ticket-1234").send("My parcel has not arrived."))
# later, in another process, with new instructions:
tuesday = Agent(MODEL, instructions="Offer a refund.")
print(asyncio.run(tuesday.conversation("ticket-1234").send("Any news?")).content)
# --8<-- [end:task]
# --- check (not counted) ---
system, *rest = MODEL.calls[1].messages
assert "Offer a refund." in system.content and "support agent" not in system.content
assert [m.content for m in rest] == [
    "My parcel has not arrived.",
    "Sorry to hear that.",
    "Any news?",
], rest
