"""The built-in tools, named and parametrised as Claude Code names them.

``Read``, ``Write``, ``Edit`` (files), ``Glob``, ``Grep`` (search) and ``Bash`` (shell), all
confined to the calling agent's workspace (``ToolContext.workspace``); see
:mod:`retinue.tools.builtin.workspace` for the rule.
"""

from retinue.tools.base import Tool
from retinue.tools.builtin.fs import edit_tool, file_tools, read_tool, write_tool
from retinue.tools.builtin.search import glob_tool, grep_tool, search_tools
from retinue.tools.builtin.shell import bash_tool, shell_tools
from retinue.tools.builtin.workspace import resolve_in_workspace, workspace_root

__all__ = [
    "bash_tool",
    "builtin_tools",
    "edit_tool",
    "file_tools",
    "glob_tool",
    "grep_tool",
    "read_tool",
    "resolve_in_workspace",
    "search_tools",
    "shell_tools",
    "workspace_root",
    "write_tool",
]


def builtin_tools() -> list[Tool]:
    """The six built-ins: ``Read``, ``Write``, ``Edit``, ``Glob``, ``Grep``, ``Bash``."""
    return [*file_tools(), *search_tools(), *shell_tools()]
