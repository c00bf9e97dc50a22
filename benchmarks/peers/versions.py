"""Print the installed peer versions as one JSON line (run in the peer environment)."""

import json
from importlib.metadata import PackageNotFoundError, version

out = {}
for name in ("openai-agents", "pydantic-ai-slim", "langgraph", "langchain-core", "openai"):
    try:
        out[name if name != "openai" else "openai (peer env)"] = version(name)
    except PackageNotFoundError:
        out[name] = "not installed"
print(json.dumps(out))
