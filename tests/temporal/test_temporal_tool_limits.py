"""A tool declares its own timeout and tries (``Tool.timeout_s``, ``Tool.attempts``): its
calls' activities on Temporal are held to them, unless the client's ``Limits`` name the
tool; against a real dev server and an in-process worker."""

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
from retinue.testing import ScriptedModel, call_tool
from retinue.tools.base import Tool, tool

pytestmark = pytest.mark.timeout(300)  # a hang bound, the dev server's start included


def slow_read(tries: list[int]) -> Tool:
    """A read that never finishes by itself; each try is counted in ``tries``."""

    @tool
    async def slow() -> str:
        """Read slowly."""
        tries.append(1)
        await asyncio.sleep(3600)
        return "done"

    slow.idempotent = True
    slow.timeout_s = 1.0
    slow.attempts = 2
    return slow


def told(messages: Sequence[Message], _tools: Sequence[ToolSpec]) -> str:
    result = messages[-1]
    assert isinstance(result, ToolResultMessage)
    return result.content


async def run_slow(address: str, tmp_path: Path, limits: Limits) -> tuple[str, int]:
    """One turn that calls ``slow``: what the model was told, and how many tries ran."""
    tries: list[int] = []
    model = ScriptedModel([call_tool("slow"), told])
    settings = Settings(home=tmp_path / "home", workspace=tmp_path)
    runtime = Runtime.create(
        settings, model=model, model_for=lambda _s: model, extra_tools=[slow_read(tries)],
        with_memory=False, builtins=False,
    )  # fmt: skip
    convs = TemporalConversations(
        await Client.connect(address), task_queue=f"test-{uuid.uuid4().hex}", limits=limits
    )
    async with make_worker(convs.client, runtime, convs.task_queue):
        reply = await convs.send(f"slow-{uuid.uuid4().hex[:8]}", "read it")
    return reply.content, len(tries)


async def test_a_tool_s_own_timeout_and_tries_hold_its_calls(
    temporal_address: str, tmp_path: Path
) -> None:
    content, tries = await run_slow(temporal_address, tmp_path, Limits(heartbeat_s=2.0))
    assert "did not finish within 1 s on each of its 2 tries" in content
    assert tries == 2


async def test_the_client_s_limits_win_over_what_a_tool_declares(
    temporal_address: str, tmp_path: Path
) -> None:
    limits = replace(Limits(heartbeat_s=2.0), tool_timeouts={"slow": 2.0})
    content, tries = await run_slow(temporal_address, tmp_path, limits)
    assert "did not finish within 2 s on each of its 2 tries" in content
    assert tries == 2
