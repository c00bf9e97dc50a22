"""An approval of an own tool: each call of refund() is put to the program's approver first."""
# ruff: noqa: E402  (the setup comes before the task and its imports)

# --- setup (not counted): a data directory of its own and a scripted model ---
from _setup import scripted

from retinue.testing import call_tool

MODEL = scripted(call_tool("refund", {"order": "42", "amount": 150}), "Refunded.")
ASKED = []
# --- task --- (counted; shown in docs/explanation/side-by-side.md)
# --8<-- [start:task]
from retinue import Agent, ApprovalRequest, tool


@tool(needs_approval=True)
def refund(order: str, amount: int) -> str:
    """Refund part of an order."""
    return f"refunded {amount} on order {order}"


def approver(request: ApprovalRequest) -> bool:
    ASKED.append(request.tool)  # (not counted: for the check)
    return request.tool == "refund"  # your own UI goes here


agent = Agent(MODEL, tools=[refund], approver=approver)
print(agent.run_sync("Refund 150 on order 42.").content)
# --8<-- [end:task]
# --- check (not counted) ---
assert ASKED == ["refund"]
assert MODEL.calls[1].messages[-1].content == "refunded 150 on order 42"
