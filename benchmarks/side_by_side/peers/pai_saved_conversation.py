# pyright: reportMissingImports=false, reportAttributeAccessIssue=false
"""Saved and resumed conversation in pydantic-ai: the program stores the messages itself."""

# ruff: noqa: E402
# --- setup (not counted) ---
from _pai import scripted

MODEL = scripted("Sorry to hear that.", "It ships today; here is a refund.")
# --- task --- (counted; shown in docs/explanation/side-by-side.md)
# --8<-- [start:task]
from pathlib import Path

from pydantic_ai import Agent, ModelMessagesTypeAdapter

saved = Path("ticket-1234.json")
monday = Agent(MODEL, instructions="You are a support agent.")
saved.write_bytes(monday.run_sync("My parcel has not arrived.").all_messages_json())
# later, in another process, with new instructions:
tuesday = Agent(MODEL, instructions="Offer a refund.")
history = ModelMessagesTypeAdapter.validate_json(saved.read_bytes())
result = tuesday.run_sync("Any news?", message_history=history)
saved.write_bytes(result.all_messages_json())
print(result.output)
# --8<-- [end:task]
# --- check (not counted) ---
assert MODEL.seen[1][-1].instructions == "Offer a refund."
assert len(ModelMessagesTypeAdapter.validate_json(saved.read_bytes())) == 4
