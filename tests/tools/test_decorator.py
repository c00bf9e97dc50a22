"""``@tool``: bare or called, and the context found by its annotation, not its position."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from pathlib import Path
from typing import Annotated

import pytest
from pydantic import Field

from retinue import Tool, ToolContext, ToolError, tool
from retinue.tools.base import preview


def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext("main", tmp_path, tmp_path)


def test_bare_decorator_makes_a_tool_with_every_parameter(tmp_path: Path) -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    assert isinstance(add, Tool)
    assert add.name == "add" and add.description == "Add two numbers."
    assert sorted(add.spec.parameters["properties"]) == ["a", "b"]
    assert add.spec.parameters["required"] == ["a", "b"]
    assert asyncio.run(add.invoke(ctx(tmp_path), '{"a": 2, "b": 3}')) == "5"


def test_called_decorator_with_and_without_arguments() -> None:
    @tool()
    def echo(text: str) -> str:
        return text

    @tool("Shout", "Say it loudly")
    def shout(text: str) -> str:
        return text.upper()

    assert echo.name == "echo" and sorted(echo.spec.parameters["properties"]) == ["text"]
    assert shout.name == "Shout" and shout.description == "Say it loudly"


def test_the_context_is_found_by_its_annotation_in_any_position(tmp_path: Path) -> None:
    @tool
    async def where(name: Annotated[str, Field(description="who")], context: ToolContext) -> str:
        return f"{name} in {context.workspace.name} as {context.agent_id}"

    assert list(where.spec.parameters["properties"]) == ["name"]
    out = asyncio.run(where.invoke(ctx(tmp_path), '{"name": "ada"}'))
    assert out == f"ada in {tmp_path.name} as main"


def test_an_unannotated_first_parameter_is_a_tool_parameter(tmp_path: Path) -> None:
    @tool
    def first(ctx, b: int) -> str:  # deliberately untyped
        return f"{ctx}-{b}"

    assert sorted(first.spec.parameters["properties"]) == ["b", "ctx"]
    assert asyncio.run(first.invoke(ctx(tmp_path), '{"ctx": "x", "b": 1}')) == "x-1"


def test_bad_arguments_are_a_tool_error(tmp_path: Path) -> None:
    @tool
    def add(a: int, b: int) -> int:
        return a + b

    with pytest.raises(ToolError, match="b"):
        asyncio.run(add.invoke(ctx(tmp_path), '{"a": 1}'))


def test_what_cannot_be_a_tool_says_so() -> None:
    with pytest.raises(TypeError, match=r"\*args"):

        @tool
        def many(*items: str) -> str:
            return ""


def test_previews_are_cut_at_a_word() -> None:
    text = "word " * 100
    cut = preview(text, 50)
    assert cut.endswith("word…") and len(cut) <= 50
    assert preview("short") == "short"


# -- plain ``def`` tools run off the event loop ---------------------------------------------

WHO = contextvars.ContextVar("who", default="nobody")


def blocking_tool(
    entered: threading.Event, release: threading.Event, done: threading.Event
) -> Tool:
    """A sync tool that blocks its thread until the test releases it (10 s at most, so a tool
    run inline on the loop fails the test instead of hanging it)."""

    @tool
    def block() -> str:
        entered.set()
        released = release.wait(10)
        done.set()
        return "released" if released else "never released"

    return block


async def test_a_blocking_sync_tool_does_not_stall_the_loop(tmp_path: Path) -> None:
    entered, release, done = threading.Event(), threading.Event(), threading.Event()
    call = asyncio.create_task(blocking_tool(entered, release, done).invoke(ctx(tmp_path), "{}"))
    # the loop keeps running while the tool blocks: this coroutine sees the tool enter,
    # then releases it; were the tool inline, the loop could not get here before it timed out
    while not entered.is_set():
        await asyncio.sleep(0.001)
    assert not call.done()
    release.set()
    assert await call == "released"


async def test_cancelling_a_blocked_sync_tool_returns_at_once(tmp_path: Path) -> None:
    entered, release, done = threading.Event(), threading.Event(), threading.Event()
    call = asyncio.create_task(blocking_tool(entered, release, done).invoke(ctx(tmp_path), "{}"))
    while not entered.is_set():
        await asyncio.sleep(0.001)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert not done.is_set()  # the thread is still blocked: the result is abandoned
    release.set()
    assert await asyncio.to_thread(done.wait, 10)


async def test_sync_tools_run_in_the_pool_with_the_callers_context(tmp_path: Path) -> None:
    @tool
    def where() -> str:
        return f"{threading.current_thread().name} {WHO.get()}"

    @tool
    async def where_async() -> str:
        return threading.current_thread().name

    WHO.set("ada")
    out = await where.invoke(ctx(tmp_path), "{}")
    assert out.startswith("retinue-tool") and out.endswith(" ada")
    assert await where_async.invoke(ctx(tmp_path), "{}") == threading.current_thread().name


async def test_a_sync_tool_error_reaches_the_caller(tmp_path: Path) -> None:
    @tool
    def broken() -> str:
        raise ToolError("the disk is full")

    with pytest.raises(ToolError, match="disk is full"):
        await broken.invoke(ctx(tmp_path), "{}")
