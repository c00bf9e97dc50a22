"""The default embedded model, for real, in its worker process, on one task of the agent suite
(``benchmarks/agent_tasks.py``): whatever it decides, every reply must parse.

Marked ``local_model``; skipped when llama-cpp-python or the default model's part packages are
not installed. Whether the task passes is the benchmark's business (the model may choose
badly); what fails here is output the runtime cannot read: a call to a tool that was not
offered, arguments that are not a JSON object, an empty reply, or call markup left in an
answer.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from retinue.llm._gguf import MODELS, installed
from retinue.llm._tool_text import MALFORMED_NAME
from retinue.llm.base import Model, ModelResponse, TextCallback, ToolSpec
from retinue.llm.local import LocalModel
from retinue.messages import Message
from retinue.runtime import LOCAL_DEFAULT

pytest.importorskip("llama_cpp")
pytestmark = [pytest.mark.local_model, pytest.mark.timeout(1200)]

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
agent_tasks = importlib.import_module("agent_tasks")

TASK = "read a file and answer"
SEED = 1
"""Names the task's folder (the name enters the prompt): the same prompts on every run, as the
model decodes deterministically (``agent_tasks.scratch_folder``)."""


class Recording:
    """A model that keeps every response, with the names of the tools it was offered."""

    def __init__(self, inner: Model) -> None:
        self.inner = inner
        self.responses: list[tuple[set[str], ModelResponse]] = []

    @property
    def name(self) -> str:
        return self.inner.name

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec] = (),
        *,
        on_text: TextCallback | None = None,
    ) -> ModelResponse:
        response = await self.inner.complete(messages, tools, on_text=on_text)
        self.responses.append(({t.name for t in tools}, response))
        return response


@pytest.fixture(scope="module")
def default_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    name = LOCAL_DEFAULT.partition(":")[2]
    if not installed(MODELS[name]):
        pytest.skip(f"the default model's extra {MODELS[name].extra!r} is not installed")
    return tmp_path_factory.mktemp("retinue-home")


async def test_every_reply_of_the_default_model_on_a_suite_task_parses(
    default_home: Path,
) -> None:
    recorded: list[Recording] = []

    def build(spec: str) -> Model:
        assert spec == LOCAL_DEFAULT, spec
        model = Recording(LocalModel(spec.partition(":")[2], home=default_home))
        recorded.append(model)
        return model

    result: dict[str, Any] = await agent_tasks.run_task(
        TASK, agent_tasks.TASKS[TASK], LOCAL_DEFAULT, default_home / "data", build, seed=SEED
    )
    responses = [r for model in recorded for r in model.responses]
    assert responses, result
    for offered, response in responses:
        message = response.message
        for call in message.tool_calls:
            assert call.name != MALFORMED_NAME and call.name in offered, call
            assert isinstance(json.loads(call.arguments), dict), call
        if not message.tool_calls:
            assert message.content.strip(), response
        assert "<tool_call>" not in message.content and '"arguments"' not in message.content
    assert not result["answer"].startswith(("ModelError", "ContextTooLongError")), result
