"""Typed output at two levels: a sub-agent's typed answer reaches its parent and Python."""
# ruff: noqa: E402  (the setup comes before the task and its imports)

# --- setup (not counted): a data directory of its own and a scripted model ---
from _setup import scripted

from retinue.testing import call_tool, final_result

MODEL = scripted(
    call_tool("SubAgent", {"task": "Check src/app.py", "role": "checker"}),
    final_result({"file": "src/app.py", "bug": "off by one"}),
    final_result({"verdict": "one bug", "findings": 1}),
)
# --- task --- (counted; shown in docs/explanation/side-by-side.md)
# --8<-- [start:task]
from pydantic import BaseModel

from retinue import Agent, Role


class Finding(BaseModel):
    file: str
    bug: str


class Review(BaseModel):
    verdict: str
    findings: int


checker = Role("checker", "Checks a file", "Report its worst bug.", ("Read",), output_type=Finding)
lead = Agent(MODEL, roles=[checker], output_type=Review)
out = lead.run_sync("Have the checker check src/app.py")
print(out.output.verdict, out.outputs(Finding))
# --8<-- [end:task]
# --- check (not counted) ---
assert out.output == Review(verdict="one bug", findings=1)
assert out.outputs(Finding) == [Finding(file="src/app.py", bug="off by one")]
