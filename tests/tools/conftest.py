"""Fixtures for the built-in tool tests: a temporary workspace, a context, and a caller."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from retinue.messages import ToolCall, ToolResultMessage
from retinue.tools import ToolContext, ToolRegistry
from retinue.tools.builtin import builtin_tools

Call = Callable[..., Awaitable[ToolResultMessage]]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """The workspace root; ``tmp_path / "outside"`` is a sibling that must stay unreachable."""
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    d = tmp_path / "outside"
    d.mkdir()
    (d / "secret.txt").write_text("top secret\n")
    return d


@pytest.fixture
def ctx(ws: Path, tmp_path: Path) -> ToolContext:
    return ToolContext(agent_id="agent-1", workspace=ws, data_dir=tmp_path / "data")


@pytest.fixture
def registry() -> ToolRegistry:
    return ToolRegistry(builtin_tools())


@pytest.fixture
def call(registry: ToolRegistry, ctx: ToolContext) -> Call:
    """``await call("Read", file_path="a.txt")`` runs one tool call through the registry."""

    async def run(name: str, /, **arguments: Any) -> ToolResultMessage:
        return await registry.execute(ToolCall("call-1", name, json.dumps(arguments)), ctx)

    return run
