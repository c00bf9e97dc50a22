"""Image in: a screenshot from a file goes to the model with the question."""
# ruff: noqa: E402  (the setup comes before the task and its imports)

# --- setup (not counted): a data directory of its own and a scripted model ---
from _setup import scripted

from retinue.messages import ImagePart

MODEL = scripted("A login form.")
with open("shot.png", "wb") as f:
    f.write(b"\x89PNG\r\n\x1a\n" + bytes(24))
# --- task --- (counted; shown in docs/explanation/side-by-side.md)
# --8<-- [start:task]
from pathlib import Path

from retinue import Agent

agent = Agent(MODEL)
print(agent.run_sync(["What does this screenshot show?", Path("shot.png")]).content)
# --8<-- [end:task]
# --- check (not counted) ---
sent = getattr(MODEL.calls[0].messages[-1], "parts", ())
assert any(isinstance(p, ImagePart) and p.media_type == "image/png" for p in sent), sent
