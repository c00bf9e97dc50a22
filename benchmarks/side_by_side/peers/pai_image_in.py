# pyright: reportMissingImports=false, reportAttributeAccessIssue=false
"""Image in, in pydantic-ai."""

# ruff: noqa: E402
# --- setup (not counted) ---
from _pai import scripted

MODEL = scripted("A login form.")
with open("shot.png", "wb") as f:
    f.write(b"\x89PNG\r\n\x1a\n" + bytes(24))
# --- task --- (counted; shown in docs/explanation/side-by-side.md)
# --8<-- [start:task]
from pydantic_ai import Agent, BinaryContent

agent = Agent(MODEL)
image = BinaryContent.from_path("shot.png")
print(agent.run_sync(["What does this screenshot show?", image]).output)
# --8<-- [end:task]
# --- check (not counted) ---
sent = MODEL.seen[0][-1].parts[-1].content
assert any(isinstance(p, BinaryContent) and p.media_type == "image/png" for p in sent), sent
