"""The memory tools, through the registry and through a real run loop."""

from pathlib import Path

import pytest

from retinue.engine import RunConfig, run
from retinue.memory import MemoryBackend
from retinue.messages import SystemMessage, ToolCall, UserMessage
from retinue.testing import ScriptedModel, call_tool
from retinue.tools import ToolContext, ToolRegistry
from retinue.tools.builtin.memory import memory_tools


@pytest.fixture
def ctx(store: MemoryBackend, tmp_path: Path) -> ToolContext:
    return ToolContext("a1", tmp_path, tmp_path, role="coder", tenant="acme", memory=store)


async def call(ctx: ToolContext, name: str, **args: object) -> tuple[str, bool]:
    import json

    result = await ToolRegistry(memory_tools()).execute(ToolCall("c1", name, json.dumps(args)), ctx)
    return result.content, result.is_error


def test_letta_names() -> None:
    assert [t.name for t in memory_tools()] == [
        "core_memory_append",
        "core_memory_replace",
        "archival_memory_insert",
        "archival_memory_search",
    ]


async def test_core_memory_tools_edit_the_callers_scope(ctx, store: MemoryBackend) -> None:
    text, err = await call(ctx, "core_memory_append", block="human", content="Ann, UTC+1")
    assert not err and "10/2000" in text
    text, err = await call(ctx, "core_memory_replace", block="human", old="UTC+1", new="CET")
    assert not err
    assert "Ann, CET" in await store.render("acme", "coder")
    assert "Ann" not in await store.render("acme", "main")
    assert "Ann" not in await store.render("other", "coder")


async def test_over_limit_write_is_an_error_result(ctx, store: MemoryBackend) -> None:
    text, err = await call(ctx, "core_memory_append", block="persona", content="x" * 2001)
    assert err
    assert text.startswith("Error: block 'persona' would hold 2001 characters")
    assert "limit of 2000" in text
    text, err = await call(ctx, "core_memory_replace", block="persona", old="a", new="b")
    assert err and "not found" in text


async def test_archival_tools(ctx) -> None:
    text, err = await call(ctx, "archival_memory_insert", content="The build uses uv")
    assert not err and text.startswith("Stored as passage #")
    text, err = await call(ctx, "archival_memory_insert", content="the build uses UV.")
    assert not err and "already holds" in text
    text, _ = await call(ctx, "archival_memory_search", query="which build tool?")
    assert "The build uses uv" in text
    text, _ = await call(ctx, "archival_memory_search", query="kubernetes")
    assert text.startswith("No archival passages match")
    _, err = await call(ctx, "archival_memory_search", query="x", limit=0)
    assert err


async def test_without_memory_the_tools_say_so(tmp_path: Path) -> None:
    ctx = ToolContext("a1", tmp_path, tmp_path)
    text, err = await call(ctx, "archival_memory_search", query="x")
    assert err and "not available" in text


async def test_agent_writes_memory_during_a_run(ctx, store: MemoryBackend) -> None:
    model = ScriptedModel(
        [
            call_tool("core_memory_append", {"block": "human", "content": "likes haiku"}),
            "Noted.",
        ]
    )
    out = await run(
        RunConfig(
            model=model,
            messages=[SystemMessage("you remember"), UserMessage("I like haiku")],
            tools=ToolRegistry(memory_tools()),
            context=ctx,
        )
    )
    assert out.content == "Noted."
    assert "likes haiku" in await store.render("acme", "coder")
    model.assert_done()
