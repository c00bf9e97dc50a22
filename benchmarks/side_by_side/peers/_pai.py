# pyright: reportMissingImports=false, reportAttributeAccessIssue=false
"""A scripted pydantic-ai model for the side-by-side programs (setup, not counted): a
FunctionModel that answers with the given parts in order (a str is a text answer)."""

from __future__ import annotations

from collections import deque
from typing import Any

from pydantic_ai import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel


def call(tool: str, args: dict[str, Any]) -> ToolCallPart:
    return ToolCallPart(tool, args)


def scripted(*steps: str | ToolCallPart) -> FunctionModel:
    queue = deque(steps)
    seen: list[Any] = []

    def answer(messages: list[Any], info: AgentInfo) -> ModelResponse:
        seen.append(messages)
        step = queue.popleft()
        return ModelResponse([TextPart(step) if isinstance(step, str) else step])

    async def stream(messages: list[Any], info: AgentInfo):
        seen.append(messages)
        step = queue.popleft()
        if isinstance(step, str):
            for word in step.split(" "):
                yield word + " "
        else:
            yield {0: DeltaToolCall(step.tool_name, step.args_as_json_str())}

    model = FunctionModel(answer, stream_function=stream)
    model.seen = seen  # type: ignore[attr-defined]
    model.queue = queue  # type: ignore[attr-defined]
    return model
