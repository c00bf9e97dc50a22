"""Each tool call's activity on Temporal is tried, and bounded, as its tool allows: a read
(an ``idempotent`` tool) is tried again, a call that may have had an effect runs once, and
``Limits.tool_timeouts`` bounds one tool's calls. Against a real dev server and an in-process
worker."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("temporalio", reason="the temporal extra (temporalio) is not installed")

from temporalio.client import Client

from retinue.config import Settings
from retinue.llm.base import ToolSpec
from retinue.messages import Message, ToolResultMessage
from retinue.runtime import Runtime
from retinue.temporal._types import Limits
from retinue.temporal.client import TemporalConversations
from retinue.temporal.worker import make_worker
from retinue.testing import ScriptedModel, call_tools
from retinue.tools.base import Tool, tool

pytestmark = pytest.mark.timeout(120)  # a hang bound


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def stuck_tool(name: str, log: Path) -> Tool:
    """A tool that writes ``started NAME`` to ``log``, then waits until it is cancelled (and
    writes ``stopped NAME``)."""

    @tool(name)
    async def stuck() -> str:
        """Start, then wait."""
        with log.open("a") as f:
            f.write(f"started {name}\n")
        try:
            await asyncio.Event().wait()
        finally:
            with log.open("a") as f:
                f.write(f"stopped {name}\n")
        return "never"

    return stuck


def results(messages: Sequence[Message]) -> dict[str, ToolResultMessage]:
    return {m.name: m for m in messages if isinstance(m, ToolResultMessage)}


async def test_a_read_is_tried_again_and_a_write_runs_once_within_its_timeout(
    temporal_address: str, tmp_path: Path
) -> None:
    log = tmp_path / "log.txt"
    seen: dict[str, ToolResultMessage] = {}

    def answer(messages: Sequence[Message], _tools: Sequence[ToolSpec]) -> str:
        seen.update(results(messages))
        return "Both calls timed out."

    model = ScriptedModel([call_tools(("write", {}), ("read", {})), answer])
    read = replace(stuck_tool("read", log), idempotent=True)
    settings = Settings(home=tmp_path / "home", workspace=tmp_path)
    runtime = Runtime.create(
        settings, model=model, model_for=lambda _s: model,
        extra_tools=[stuck_tool("write", log), read], with_memory=False, builtins=False,
    )  # fmt: skip
    client = await Client.connect(temporal_address)
    limits = Limits(heartbeat_s=1.5, tool_attempts=2, tool_timeouts={"write": 1.0, "read": 1.0})
    convs = TemporalConversations(client, task_queue=f"test-{uuid.uuid4().hex}", limits=limits)
    async with make_worker(client, runtime, convs.task_queue):
        reply = await convs.send("policy", "write and read")
        # each try past its timeout was stopped on the worker (its cancel came with a beat)
        while lines(log).count("stopped read") < 2 or "stopped write" not in lines(log):
            await asyncio.sleep(0.05)
    assert reply.content == "Both calls timed out."
    assert lines(log).count("started write") == 1  # a call that may have had an effect: once
    assert lines(log).count("started read") == 2  # a read: tried again (tool_attempts)
    write, read_result = seen["write"], seen["read"]
    assert write.is_error and read_result.is_error
    assert "did not finish within 1 s and was stopped" in write.content
    assert "did not finish within 1 s on each of its 2 tries" in read_result.content
    model.assert_done()
