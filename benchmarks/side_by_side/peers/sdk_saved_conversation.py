# pyright: reportMissingImports=false, reportAttributeAccessIssue=false
"""Saved and resumed conversation in the OpenAI Agents SDK: a SQLite session by id."""

# ruff: noqa: E402
# --- setup (not counted) ---
from _sdk import Scripted

MODEL = Scripted("Sorry to hear that.", "It ships today; here is a refund.")
# --- task --- (counted; shown in docs/explanation/side-by-side.md)
# --8<-- [start:task]
from agents import Agent, Runner, SQLiteSession

chat = SQLiteSession("ticket-1234", "conversations.db")
monday = Agent("support", instructions="You are a support agent.", model=MODEL)
Runner.run_sync(monday, "My parcel has not arrived.", session=chat)
# later, in another process, with new instructions:
tuesday = Agent("support", instructions="Offer a refund.", model=MODEL)
chat = SQLiteSession("ticket-1234", "conversations.db")
print(Runner.run_sync(tuesday, "Any news?", session=chat).final_output)
# --8<-- [end:task]
# --- check (not counted) ---
system, sent = MODEL.seen[1]
assert system == "Offer a refund." and len(sent) == 3, sent
