"""The built-in tools, named and parametrised as Claude Code names them.

``Read``, ``Write``, ``Edit``, ``MultiEdit``, ``LS`` (files), ``Glob``, ``Grep`` (search),
``Bash`` (shell), all confined to the calling agent's workspace (``ToolContext.workspace``;
see :mod:`retinue.tools.builtin.workspace` for the rule); ``TodoWrite`` (the agent's task
list, :mod:`retinue.tools.builtin.todo`); ``WebFetch`` and ``WebSearch`` (bounded HTTP, and a
search backend that is off by default: :mod:`retinue.tools.builtin.web`).
"""

from retinue.tools.base import Tool
from retinue.tools.builtin.fs import edit_tool, file_tools, multi_edit_tool, read_tool, write_tool
from retinue.tools.builtin.listing import ls_tool
from retinue.tools.builtin.search import glob_tool, grep_tool, search_tools
from retinue.tools.builtin.shell import bash_tool, shell_tools
from retinue.tools.builtin.todo import todo_tools, todo_write_tool
from retinue.tools.builtin.web import make_web_fetch, make_web_search, web_tools
from retinue.tools.builtin.workspace import resolve_in_workspace, workspace_root

__all__ = [
    "bash_tool",
    "builtin_tools",
    "edit_tool",
    "file_tools",
    "glob_tool",
    "grep_tool",
    "ls_tool",
    "make_web_fetch",
    "make_web_search",
    "multi_edit_tool",
    "read_tool",
    "resolve_in_workspace",
    "search_tools",
    "shell_tools",
    "todo_tools",
    "todo_write_tool",
    "web_tools",
    "workspace_root",
    "write_tool",
]

for _reader in (read_tool, ls_tool, glob_tool, grep_tool):  # they only read: safe to repeat
    _reader.idempotent = True


def builtin_tools(
    *, web_search_url: str | None = None, web_fetch_allow_private: bool = False
) -> list[Tool]:
    """``Read``, ``Write``, ``Edit``, ``MultiEdit``, ``LS``, ``Glob``, ``Grep``, ``Bash``,
    ``TodoWrite``, ``WebFetch``, ``WebSearch`` (the web settings of ``config.toml``: see
    :func:`~retinue.tools.builtin.web.web_tools`)."""
    web = web_tools(web_search_url, allow_private=web_fetch_allow_private)
    return [*file_tools(), ls_tool, *search_tools(), *shell_tools(), *todo_tools(), *web]
