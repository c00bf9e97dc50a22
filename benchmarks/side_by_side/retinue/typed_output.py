"""Typed output: the answer is a validated pydantic object."""
# ruff: noqa: E402  (the setup comes before the task and its imports)

# --- setup (not counted): a data directory of its own and a scripted model ---
from _setup import scripted

from retinue.testing import final_result

MODEL = scripted(final_result({"verdict": "needs work", "findings": 2}))
# --- task --- (counted; shown in docs/explanation/side-by-side.md)
# --8<-- [start:task]
from pydantic import BaseModel

from retinue import Agent


class Review(BaseModel):
    verdict: str
    findings: int


agent = Agent(MODEL, output_type=Review)
review = agent.run_sync("Review src/app.py").output
print(review.verdict, review.findings)
# --8<-- [end:task]
# --- check (not counted) ---
assert review == Review(verdict="needs work", findings=2)
