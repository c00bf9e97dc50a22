"""A guard: a Python check refuses a tool call before it runs; the model reads why."""
# ruff: noqa: E402  (the setup comes before the task and its imports)

# --- setup (not counted): a data directory of its own and a scripted model ---
from _setup import scripted

from retinue.testing import call_tool

MODEL = scripted(call_tool("deploy", {"target": "prod"}), "I may not deploy to prod.")
DEPLOYED = []
# --- task --- (counted; shown in docs/explanation/side-by-side.md)
# --8<-- [start:task]
from retinue import Agent, Guard, ToolRequest, Verdict, tool


@tool
def deploy(target: str) -> str:
    """Deploy the app to a target."""
    DEPLOYED.append(target)  # (not counted: for the check)
    return f"deployed to {target}"


def no_prod(call: ToolRequest) -> Verdict | None:
    return Verdict.deny("production is off limits") if call.arguments["target"] == "prod" else None


agent = Agent(MODEL, tools=[deploy], guards=[Guard(before_tool=no_prod)])
print(agent.run_sync("Deploy to prod").content)
# --8<-- [end:task]
# --- check (not counted) ---
assert DEPLOYED == []
assert "production is off limits" in MODEL.calls[1].messages[-1].content
