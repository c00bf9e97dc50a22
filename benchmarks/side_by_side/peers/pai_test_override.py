# pyright: reportMissingImports=false, reportAttributeAccessIssue=false
"""A test with an override in pydantic-ai."""

# --- setup (not counted) ---
import os

os.environ.setdefault("OPENAI_API_KEY", "sk-not-used")
# --- task --- (counted; shown in docs/explanation/side-by-side.md)
# --8<-- [start:task]
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel


class Verdict(BaseModel):
    ok: bool


reviewer = Agent("openai:gpt-4o-mini", output_type=Verdict)


def test_the_reviewer_answers_a_verdict() -> None:
    with reviewer.override(model=TestModel(custom_output_args={"ok": True})):
        assert reviewer.run_sync("Is the change safe?").output == Verdict(ok=True)


# --8<-- [end:task]
# --- check (not counted) ---
test_the_reviewer_answers_a_verdict()
print("passed")
