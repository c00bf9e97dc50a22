"""The set-up of the Retinue side-by-side programs (not counted): a data directory of the
program's own, and a scripted model that answers the given steps in order, and a sub-agent's
memory consolidation (when its session ends) with an empty ``memorize``."""

from __future__ import annotations

import os
import tempfile
from collections import deque
from collections.abc import Sequence
from typing import Any

from retinue.testing import ScriptedModel, call_tool

os.environ.setdefault("RETINUE_HOME", tempfile.mkdtemp())
os.environ.setdefault("RETINUE_BLOCK_REAL_MODELS", "1")

NOTHING_LEARNED = call_tool("memorize", {"block_updates": [], "new_passages": []})


def scripted(*steps: Any) -> ScriptedModel:
    queue = deque(steps)

    def answer(messages: Sequence[Any], tools: Sequence[Any]) -> Any:
        if any(t.name == "memorize" for t in tools):
            return NOTHING_LEARNED
        return queue.popleft()

    return ScriptedModel(responder=answer)
