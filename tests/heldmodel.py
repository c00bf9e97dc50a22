"""A scripted model whose calls wait for the test: a turn stays in flight for as long as a
test needs, where a ``delay=`` would be a race that a loaded machine can lose (the test
acting after the delay ran out)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from typing import Any

from retinue.llm.base import ModelResponse, TextCallback, ToolSpec
from retinue.messages import Message
from retinue.testing import ScriptedModel

__all__ = ["HOLD_S", "HeldModel"]

HOLD_S = 60.0
"""The longest a call is held: a bound on a test that never releases it, not a timing."""


class HeldModel(ScriptedModel):
    """A :class:`ScriptedModel` whose calls wait until :attr:`release` is set, from any
    thread (the model may run in a server's own loop). :attr:`waiting` is set once a call
    is held; :attr:`begun` counts the calls begun (``call_count`` those released)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.release = threading.Event()
        self.waiting = threading.Event()
        self.begun = 0

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        *,
        on_text: TextCallback | None = None,
    ) -> ModelResponse:
        self.begun += 1
        self.waiting.set()
        deadline = time.monotonic() + HOLD_S
        while not self.release.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        return await super().complete(messages, tools, on_text=on_text)
