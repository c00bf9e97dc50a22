# pyright: reportMissingImports=false, reportAttributeAccessIssue=false
"""Typed output in pydantic-ai."""

# ruff: noqa: E402
# --- setup (not counted) ---
from _pai import call, scripted

MODEL = scripted(call("final_result", {"verdict": "needs work", "findings": 2}))
# --- task --- (counted; shown in docs/explanation/side-by-side.md)
# --8<-- [start:task]
from pydantic import BaseModel
from pydantic_ai import Agent


class Review(BaseModel):
    verdict: str
    findings: int


agent = Agent(MODEL, output_type=Review)
review = agent.run_sync("Review src/app.py").output
print(review.verdict, review.findings)
# --8<-- [end:task]
# --- check (not counted) ---
assert review == Review(verdict="needs work", findings=2)
