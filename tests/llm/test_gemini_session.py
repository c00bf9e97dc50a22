"""Gemini 3 (emulated) in the long-lived parts of the suite: a long session compressed several
times, and a durable restart mid-turn, with no request refused by the emulated rules."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from sessionkit import long_session, respond

from retinue.config import Settings
from retinue.durable import (
    RESTARTED_RESULT,
    record_conversation,
    restore_conversation,
    suspend_tree,
    tree_settled,
)
from retinue.engine.compress import SUMMARY_PREFIX, is_summary
from retinue.llm.gemini import GeminiModel
from retinue.llm.loopback_gemini import LoopbackGeminiServer
from retinue.messages import (
    AssistantMessage,
    ToolResultMessage,
    history_problems,
)
from retinue.runtime import Conversation, Runtime
from retinue.testing import ScriptedModel, call_tool
from retinue.tools.base import ToolContext, tool

pytestmark = pytest.mark.timeout(60)


def _signed_calls(body: dict[str, Any]) -> list[bool]:
    return [
        "thoughtSignature" in p for c in body["contents"] for p in c["parts"] if "functionCall" in p
    ]


def _summarised_and_signed(body: dict[str, Any]) -> bool:
    texts = [p.get("text", "") for c in body["contents"] for p in c["parts"]]
    summarised = any(str(t).startswith(SUMMARY_PREFIX) for t in texts)
    signed = _signed_calls(body)
    return summarised and bool(signed) and all(signed)


async def test_a_long_session_on_gemini_compresses_and_is_never_refused(tmp_path: Path) -> None:
    with LoopbackGeminiServer(ScriptedModel([respond] * 40)) as server:
        model = GeminiModel("gemini-3-pro", base_url=server.base_url, max_retries=0)
        messages = await long_session(model, tmp_path)
    assert server.rejected == []
    assert any(is_summary(m) for m in messages)
    assert any(_summarised_and_signed(b) for b in server.requests)


DONE: list[str] = []
BLOCKED: list[asyncio.Event] = []


@tool("Bump")
def bump(ctx: ToolContext, label: str) -> str:
    """Do something that must not be done twice."""
    DONE.append(label)
    return f"bumped {label}"


@tool("Block")
async def block(ctx: ToolContext) -> str:
    """Work until the process dies."""
    BLOCKED[-1].set()
    await asyncio.get_running_loop().create_future()
    return "never"


def _process(tmp_path: Path, model: GeminiModel) -> tuple[Runtime, Conversation]:
    settings = Settings.load(home=tmp_path / "home", workspace=tmp_path)
    runtime = Runtime.create(settings, model=model, extra_tools=[bump, block])
    return runtime, runtime.conversation("conv-g1", keep_sessions=True)


async def test_a_restart_mid_turn_sends_the_recorded_signatures_back(tmp_path: Path) -> None:
    DONE.clear()
    BLOCKED.append(asyncio.Event())
    script = ScriptedModel([call_tool("Bump", {"label": "one"}), call_tool("Block"), "finished"])
    with LoopbackGeminiServer(script) as server:
        model = GeminiModel("gemini-3-pro", base_url=server.base_url, max_retries=0)
        runtime, first = _process(tmp_path, model)
        assert runtime.memory is not None
        record_conversation(first, runtime.memory.journal, "default")
        turn = asyncio.create_task(first.send("go"))
        await asyncio.wait_for(BLOCKED[-1].wait(), 30)
        await suspend_tree(first)  # the process dies here
        assert turn.done()

        runtime, second = _process(tmp_path, model)
        assert runtime.memory is not None
        await restore_conversation(second, runtime.memory.journal, "default", None)
        await tree_settled(second)
        await model.aclose()
    assert server.rejected == []
    assert DONE == ["one"]
    history = second.messages
    final = history[-1]
    assert isinstance(final, AssistantMessage) and final.content == "finished"
    assert history_problems(history) == []
    cut = [m for m in history if isinstance(m, ToolResultMessage) and m.name == "Block"]
    assert len(cut) == 1 and cut[0].content == RESTARTED_RESULT
    # the request after the restart sent both calls of the turn back with their signatures,
    # read from the journal (no placeholder: each is the signature the server gave out)
    assert _signed_calls(server.requests[-1]) == [True, True]
    assert "skip_thought_signature_validator" not in str(server.requests[-1])
