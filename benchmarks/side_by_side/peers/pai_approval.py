# pyright: reportMissingImports=false, reportAttributeAccessIssue=false
"""An approval of an own tool in pydantic-ai: the run stops with deferred requests; the
program answers them and runs again."""

# ruff: noqa: E402
# --- setup (not counted) ---
from _pai import call, scripted

MODEL = scripted(call("refund", {"order": "42", "amount": 150}), "Refunded.")
ASKED = []
# --- task --- (counted; shown in docs/explanation/side-by-side.md)
# --8<-- [start:task]
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults

agent = Agent(MODEL, output_type=[str, DeferredToolRequests])


@agent.tool_plain(requires_approval=True)
def refund(order: str, amount: int) -> str:
    """Refund part of an order."""
    return f"refunded {amount} on order {order}"


def approve(call) -> bool:
    ASKED.append(call.tool_name)  # (not counted: for the check)
    return call.tool_name == "refund"  # your own UI goes here


result = agent.run_sync("Refund 150 on order 42.")
while isinstance(result.output, DeferredToolRequests):
    answers = DeferredToolResults(
        approvals={c.tool_call_id: approve(c) for c in result.output.approvals}
    )
    result = agent.run_sync(message_history=result.all_messages(), deferred_tool_results=answers)
print(result.output)
# --8<-- [end:task]
# --- check (not counted) ---
assert ASKED == ["refund"]
assert MODEL.seen[1][-1].parts[0].content == "refunded 150 on order 42"
