"""``@tool``: bare or called, and the context found by its annotation, not its position."""

from __future__ import annotations

import asyncio
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
