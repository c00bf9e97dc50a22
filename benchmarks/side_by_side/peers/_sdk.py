# pyright: reportMissingImports=false, reportAttributeAccessIssue=false
"""A scripted OpenAI Agents SDK model for the side-by-side programs (setup, not counted): it
answers with the given steps in order (a str is a text answer, ``call(...)`` a tool call).
The SDK ships no test model; this one implements its ``Model`` interface, without streaming."""

from __future__ import annotations

import json
from collections import deque
from typing import Any

from agents import Model, ModelResponse, Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)


def call(tool: str, args: dict[str, Any]) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        type="function_call", name=tool, arguments=json.dumps(args), call_id=f"call-{tool}"
    )


class Scripted(Model):
    def __init__(self, *steps: str | ResponseFunctionToolCall) -> None:
        self.queue = deque(steps)
        self.seen: list[tuple[str | None, Any]] = []

    async def get_response(self, system_instructions, input, *args: Any, **kwargs: Any):
        self.seen.append((system_instructions, input))
        step = self.queue.popleft()
        if isinstance(step, str):
            text = ResponseOutputText(type="output_text", text=step, annotations=[])
            step = ResponseOutputMessage(
                id="msg", type="message", role="assistant", status="completed", content=[text]
            )
        return ModelResponse(output=[step], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any):
        raise NotImplementedError
