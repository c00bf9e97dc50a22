"""Retinue: a runtime for LLM agents that delegate to role-defined sub-agents.

The names below are the curated public API (pinned by a test). They are loaded on first use,
so that ``import retinue`` — and the ``retinue`` command's start-up — stay fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from retinue.engine import RunConfig, RunOutput, run
    from retinue.errors import (
        ConfigError,
        ModelError,
        RetinueError,
        RoleError,
        SubAgentError,
        ToolError,
    )
    from retinue.llm import Model, ModelResponse, ToolSpec, resolve_model
    from retinue.messages import (
        AssistantMessage,
        Message,
        SystemMessage,
        ToolCall,
        ToolResultMessage,
        Usage,
        UserMessage,
    )
    from retinue.tools import Tool, ToolContext, ToolRegistry, tool

_HOMES = {
    "retinue.engine": ("RunConfig", "RunOutput", "run"),
    "retinue.errors": (
        "ConfigError",
        "ModelError",
        "RetinueError",
        "RoleError",
        "SubAgentError",
        "ToolError",
    ),
    "retinue.llm": ("Model", "ModelResponse", "ToolSpec", "resolve_model"),
    "retinue.messages": (
        "AssistantMessage",
        "Message",
        "SystemMessage",
        "ToolCall",
        "ToolResultMessage",
        "Usage",
        "UserMessage",
    ),
    "retinue.tools": ("Tool", "ToolContext", "ToolRegistry", "tool"),
}
_WHERE = {name: module for module, names in _HOMES.items() for name in names}


__all__ = [
    "AssistantMessage",
    "ConfigError",
    "Message",
    "Model",
    "ModelError",
    "ModelResponse",
    "RetinueError",
    "RoleError",
    "RunConfig",
    "RunOutput",
    "SubAgentError",
    "SystemMessage",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolError",
    "ToolRegistry",
    "ToolResultMessage",
    "ToolSpec",
    "Usage",
    "UserMessage",
    "resolve_model",
    "run",
    "tool",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'retinue' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
