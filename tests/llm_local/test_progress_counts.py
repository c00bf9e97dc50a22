"""The embedded model's progress reports count tokens as its usage does, so the chat's
spinner and the token line after it agree (issue 25, item 6). Runs the real model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from retinue.llm.base import ToolSpec
from retinue.llm.local import LocalModel, local_progress
from retinue.messages import SystemMessage, UserMessage

pytest.importorskip("llama_cpp")
pytestmark = [pytest.mark.local_model, pytest.mark.timeout(600)]

READ = ToolSpec(
    "Read",
    "Read a text file of the workspace.",
    {
        "type": "object",
        "properties": {"file_path": {"type": "string", "description": "the file to read"}},
        "required": ["file_path"],
    },
)


async def test_a_tool_calls_reports_count_as_its_usage(model_home: Path) -> None:
    model = LocalModel(
        "qwen2.5-coder-0.5b", home=model_home, temperature=0.0, seed=3, max_tokens=64
    )
    reports: list[dict[str, Any]] = []
    token = local_progress.set(reports.append)
    try:
        response = await model.complete(
            [
                SystemMessage("You are a coding agent. Use the Read tool to read files."),
                UserMessage("Read the file notes.txt and tell me what it says."),
            ],
            [READ],
        )
    finally:
        local_progress.reset(token)
    assert response.message.tool_calls, response.message.content  # the step that differed
    prompts = [r["prompt_tokens"] for r in reports if r["progress"] == "prompt"]
    assert prompts[-1] == response.usage.input_tokens  # what the spinner showed last
    made = [r["tokens"] for r in reports if r["progress"] == "generating" and "tokens" in r]
    assert all(n <= response.usage.output_tokens for n in made)
