"""Retinue: a runtime for LLM agents that delegate to role-defined sub-agents."""

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
