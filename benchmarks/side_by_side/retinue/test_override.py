"""A test with an override: the program's own agent runs on a scripted model in a test."""

# --- setup (not counted): a data directory of its own and a scripted model ---
import _setup  # noqa: F401  (RETINUE_BLOCK_REAL_MODELS=1: no real model is reached)

# --- task --- (counted; shown in docs/explanation/side-by-side.md)
# --8<-- [start:task]
from pydantic import BaseModel

from retinue import Agent
from retinue.testing import ScriptedModel, final_result


class Verdict(BaseModel):
    ok: bool


reviewer = Agent("openai:gpt-4o-mini", output_type=Verdict)


def test_the_reviewer_answers_a_verdict() -> None:
    with reviewer.override(model=ScriptedModel([final_result({"ok": True})])):
        assert reviewer.run_sync("Is the change safe?").output == Verdict(ok=True)


# --8<-- [end:task]
# --- check (not counted) ---
test_the_reviewer_answers_a_verdict()
print("passed")
