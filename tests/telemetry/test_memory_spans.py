"""Memory operations and compression as spans: a memory tool's store call under its
``execute_tool`` span, consolidation, and a compression."""

from __future__ import annotations

from pathlib import Path

from tracekit import Traced

from retinue.engine.compress import AutoCompressor
from retinue.memory import SQLiteMemory
from retinue.messages import AssistantMessage, Message, SystemMessage, UserMessage
from retinue.telemetry import trace as tel
from retinue.testing import ScriptedModel, call_tool
from retinue.tools import ToolContext, ToolRegistry
from retinue.tools.builtin.memory import memory_tools

SESSION: list[Message] = [
    SystemMessage("You are the dba role."),
    UserMessage("Our primary database is Postgres 16 on host db1."),
    AssistantMessage("Understood, Postgres 16 on db1."),
]


def parent_name(span, spans) -> str | None:
    if span.parent is None:
        return None
    return next(s.name for s in spans if s.context.span_id == span.parent.span_id)


async def test_memory_tools_and_consolidation_are_spans(tmp_path: Path, traced: Traced) -> None:
    store = SQLiteMemory(tmp_path / "memory.db")
    try:
        ctx = ToolContext("a", tmp_path, tmp_path, role="dba", memory=store)
        registry = ToolRegistry(memory_tools())
        with tel.span("invoke_agent dba"):
            calls = [
                call_tool("core_memory_append", {"block": "human", "content": "ops"}, id="c1"),
                call_tool("archival_memory_search", {"query": "primary"}, id="c2"),
            ]
            for message in calls:
                await tel.traced_calls(message.tool_calls, lambda c: _one(registry, c, ctx))
        memorize = call_tool(
            "memorize",
            {"block_updates": [{"block": "working_context", "value": "db1"}], "new_passages": []},
        )
        await store.consolidate(
            tenant="default", role="dba", session_id="s1", messages=SESSION,
            model=ScriptedModel([memorize]),
        )  # fmt: skip
    finally:
        store.close()
    spans = traced.spans()
    names = {s.name: s for s in spans}
    assert parent_name(names["memory update_block"], spans) == "execute_tool core_memory_append"
    assert parent_name(names["memory search"], spans) == "execute_tool archival_memory_search"
    assert (names["memory search"].attributes or {})["gen_ai.agent.name"] == "dba"
    assert "memory consolidate" in names
    assert traced.open.open == {}


async def _one(registry: ToolRegistry, call, ctx: ToolContext):
    return [await registry.execute(call, ctx)]


async def test_a_compression_is_a_span(tmp_path: Path, traced: Traced) -> None:
    messages: list[Message] = [SystemMessage("sys")]
    for i in range(10):
        messages += [UserMessage(f"q{i} " + "lorem " * 40), AssistantMessage("a " * 40)]
    keeper = AutoCompressor(
        context_window=1_000, output_reserve=100, keep_ratio=0.05, hard_keep_ratio=0.05
    )
    ctx = ToolContext("a", tmp_path, tmp_path)
    result = await keeper.compress_now(messages, ScriptedModel(["## Task\n- go on"]), ctx)
    assert result is not None
    (compress,) = [s for s in traced.spans() if s.name == "compress"]
    assert (compress.attributes or {})["retinue.reason"]
