"""The run loop reports to one declared observer (:mod:`retinue.engine.observer`): each model
call's usage, each step boundary (only to an observer that records steps) and the steering to
show before each model call; the deprecated callbacks of a ``RunConfig`` still work."""

from __future__ import annotations

from pathlib import Path

from retinue.engine import RunConfig, run, run_turn
from retinue.engine.observer import RunObserver
from retinue.messages import Message, Usage, UserMessage
from retinue.testing import ScriptedModel, call_tool
from retinue.tools import ToolContext, ToolRegistry, tool


@tool("Noop")
async def noop(ctx: ToolContext) -> str:
    """Does nothing."""
    return "ok"


class Watcher:
    def __init__(self, records: bool, steering: list[list[str]]) -> None:
        self.records = records
        self.usage: list[Usage] = []
        self.steps: list[int] = []  # the history's length at each step boundary
        self.history: list[Message] = []
        self.to_steer = steering

    def used(self, usage: Usage) -> None:
        self.usage.append(usage)

    def steering(self) -> list[str]:
        return self.to_steer.pop(0) if self.to_steer else []

    async def step(self) -> None:
        self.steps.append(len(self.history))


def config_for(tmp_path: Path, model: ScriptedModel, observer: RunObserver | None) -> RunConfig:
    ctx = ToolContext("main", tmp_path, tmp_path)
    return RunConfig(model, [UserMessage("go")], ToolRegistry([noop]), ctx, observer=observer)


async def test_the_observer_hears_usage_steps_and_steering(tmp_path: Path) -> None:
    model = ScriptedModel([call_tool("Noop", {}), "done"])
    watcher = Watcher(True, [[], ["mind the tests"]])
    config = config_for(tmp_path, model, watcher)
    watcher.history = config.messages
    out = await run_turn(config)
    assert out.content == "done"
    assert len(watcher.usage) == 2  # one per model call, as it came
    # a reply (2 messages), its tool result (3), the steered note and the last reply (5)
    assert watcher.steps == [2, 3, 5]
    sent = model.calls[1].messages
    assert isinstance(sent[-1], UserMessage) and "mind the tests" in sent[-1].content


async def test_an_observer_that_does_not_record_is_not_handed_steps(tmp_path: Path) -> None:
    watcher = Watcher(False, [])
    await run_turn(config_for(tmp_path, ScriptedModel([call_tool("Noop", {}), "done"]), watcher))
    assert watcher.steps == [] and len(watcher.usage) == 2


async def test_the_deprecated_callbacks_become_the_observer(tmp_path: Path) -> None:
    usage: list[Usage] = []
    steps: list[str] = []

    async def on_step() -> None:
        steps.append("step")

    ctx = ToolContext("main", tmp_path, tmp_path)
    model = ScriptedModel([call_tool("Noop", {}), "done"])
    config = RunConfig(model, [UserMessage("go")], ToolRegistry([noop]), ctx,
                       on_usage=usage.append, on_step=on_step)  # fmt: skip
    assert config.observer is not None
    out = await run(config)  # (``run``: the deprecated name of ``run_turn``)
    assert out.content == "done" and len(usage) == 2 and steps == ["step"] * 3
