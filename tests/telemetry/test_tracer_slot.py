"""Tracing reaches the engine through the tracer it declares
(:class:`retinue.engine.observer.RunTracer`), installed in :mod:`retinue._tracer`:
:mod:`retinue.telemetry.trace` installs its own when enabled, and any other implementation
installed there hears a session's turn the same way."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import pytest
from tracekit import Traced

from retinue import _tracer
from retinue.engine import RunConfig
from retinue.engine.observer import RunTracer
from retinue.engine.session import Session
from retinue.messages import Message, SystemMessage, ToolCall, ToolResultMessage, Usage
from retinue.telemetry import trace as tel
from retinue.testing import ScriptedModel, call_tool
from retinue.tools import ToolContext, ToolRegistry, tool


def test_enabling_installs_the_telemetry_tracer_and_disabling_removes_it(
    traced: Traced,
) -> None:
    installed: RunTracer = tel.TRACER  # (pyright: it implements the engine's protocol)
    assert _tracer.current is installed and tel.ENABLED
    tel.disable()
    assert _tracer.current is None and not tel.ENABLED
    tel.enable(traced.provider)
    assert _tracer.current is installed


class _Turn:
    def __init__(self, heard: list[str]) -> None:
        self.heard = heard

    def ok(self, usage: Usage, content: str, stop_reason: str) -> None:
        self.heard.append(f"turn ok {stop_reason} {content}")

    def fail(self, reason: str, usage: Usage | None = None) -> None:
        self.heard.append(f"turn failed {reason}")

    def end(self) -> None:
        self.heard.append("turn end")


class _Call:
    def __init__(self, heard: list[str]) -> None:
        self.heard = heard

    def end(self, usage: Usage | None, output: Message | None = None) -> None:
        self.heard.append(f"model end {usage is not None}")


class Recorder:
    """A tracer that writes down what it hears, in order."""

    def __init__(self) -> None:
        self.heard: list[str] = []

    def begin_turn(self, *, session_id: str, agent_id: str, role: str, depth: int,
                   interactive: bool, model: str, text: str | None) -> _Turn:  # fmt: skip
        self.heard.append(f"turn {session_id} {role} {model} {text}")
        return _Turn(self.heard)

    def begin_model_call(self, model: str, messages: Sequence[Message]) -> _Call:
        self.heard.append(f"model {model} {len(messages)}")
        return _Call(self.heard)

    async def tool_calls(
        self,
        calls: Sequence[ToolCall],
        run_one: Callable[[ToolCall], Awaitable[list[ToolResultMessage]]],
    ) -> list[ToolResultMessage]:
        results = [r for call in calls for r in await run_one(call)]
        self.heard.append(f"tools {[c.name for c in calls]} {[r.content for r in results]}")
        return results

    def compress(self, *, hard: bool, reason: str) -> AbstractContextManager[Any]:
        self.heard.append(f"compress {reason}")
        return nullcontext()

    def event(self, name: str, **attributes: Any) -> None:
        self.heard.append(f"event {name}")


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    assert _tracer.current is None
    recorder = Recorder()
    installed: RunTracer = recorder  # (pyright: it implements the protocol)
    _tracer.current = installed
    try:
        yield recorder
    finally:
        _tracer.current = None


@tool("Echo")
async def echo(ctx: ToolContext, text: str) -> str:
    """Say it back."""
    return f"echo:{text}"


async def test_an_installed_tracer_hears_a_turn_its_model_calls_and_its_tools(
    tmp_path: Path, recorder: Recorder
) -> None:
    model = ScriptedModel([call_tool("Echo", {"text": "hi"}), "said hi"], name="scripted:main")
    ctx = ToolContext("main", tmp_path, tmp_path, role="main")
    config = RunConfig(model, [SystemMessage("main")], ToolRegistry([echo]), ctx)
    out = await Session("s1", config).send("say hi")
    assert out.content == "said hi"
    assert recorder.heard == [
        "turn s1 main scripted:main say hi",
        "model scripted:main 2",
        "model end True",
        "tools ['Echo'] ['echo:hi']",
        "model scripted:main 4",
        "model end True",
        "turn ok final said hi",
        "turn end",
    ]
