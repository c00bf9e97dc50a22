# pyright: reportMissingImports=false, reportAttributeAccessIssue=false
"""Typed output at two levels in pydantic-ai: agent delegation through a tool; the sub-agent's
typed object reaches Python only by walking the run's messages for the tool's return."""

# ruff: noqa: E402
# --- setup (not counted) ---
from _pai import call, scripted

MODEL = scripted(
    call("check", {"file": "src/app.py"}),
    call("final_result", {"file": "src/app.py", "bug": "off by one"}),
    call("final_result", {"verdict": "one bug", "findings": 1}),
)
# --- task --- (counted; shown in docs/explanation/side-by-side.md)
# --8<-- [start:task]
from pydantic import BaseModel
from pydantic_ai import Agent, RunContext, ToolReturnPart


class Finding(BaseModel):
    file: str
    bug: str


class Review(BaseModel):
    verdict: str
    findings: int


checker = Agent(MODEL, output_type=Finding, instructions="Report its worst bug.")
lead = Agent(MODEL, output_type=Review)


@lead.tool
async def check(ctx: RunContext, file: str) -> Finding:
    """Check a file for its worst bug."""
    return (await checker.run(f"Check {file}", usage=ctx.usage)).output


result = lead.run_sync("Have the checker check src/app.py")
messages = result.all_messages()
findings = [p.content for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
print(result.output.verdict, [f for f in findings if isinstance(f, Finding)])
# --8<-- [end:task]
# --- check (not counted) ---
assert result.output == Review(verdict="one bug", findings=1)
assert [f for f in findings if isinstance(f, Finding)] == [
    Finding(file="src/app.py", bug="off by one")
]
