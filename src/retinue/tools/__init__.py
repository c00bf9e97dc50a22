"""Tools the model can call, their context, and the registry."""

from retinue.tools.base import Delegator, Tool, ToolContext, ToolRegistry, ToolResult, merge, tool

__all__ = ["Delegator", "Tool", "ToolContext", "ToolRegistry", "ToolResult", "merge", "tool"]
