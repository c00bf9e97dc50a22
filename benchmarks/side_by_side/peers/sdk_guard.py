# pyright: reportMissingImports=false, reportAttributeAccessIssue=false
"""A guard in the OpenAI Agents SDK: a tool input guardrail refuses the call."""

# ruff: noqa: E402
# --- setup (not counted) ---
from _sdk import Scripted, call

MODEL = Scripted(call("deploy", {"target": "prod"}), "I may not deploy to prod.")
DEPLOYED = []
# --- task --- (counted; shown in docs/explanation/side-by-side.md)
# --8<-- [start:task]
import json

from agents import (
    Agent,
    Runner,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrailData,
    function_tool,
    tool_input_guardrail,
)


@tool_input_guardrail
def no_prod(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
    if json.loads(data.context.tool_arguments)["target"] == "prod":
        return ToolGuardrailFunctionOutput.reject_content("production is off limits")
    return ToolGuardrailFunctionOutput.allow()


@function_tool(tool_input_guardrails=[no_prod])
def deploy(target: str) -> str:
    """Deploy the app to a target."""
    DEPLOYED.append(target)  # (not counted: for the check)
    return f"deployed to {target}"


agent = Agent("deployer", tools=[deploy], model=MODEL)
print(Runner.run_sync(agent, "Deploy to prod").final_output)
# --8<-- [end:task]
# --- check (not counted) ---
assert DEPLOYED == []
assert "production is off limits" in str(MODEL.seen[1][1][-1])
