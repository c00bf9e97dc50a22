"""Permission modes, with Claude Code's names and meanings, and what each decides by itself.

A tool is of one *kind*: it only reads (``Read``, ``Glob``, ``Grep``, ``LS``, ``TodoWrite``,
the memory tools, ``SubAgent``…), it edits files (``Write``, ``Edit``, ``MultiEdit``,
``NotebookEdit``), it runs commands (``Bash``), it reaches the network (``WebFetch``,
``WebSearch``), it is an MCP server's (``mcp__…``), or it is the program's own (a tool a library
user registered). Where no rule matched, the mode decides by kind:

============== ====== ====== ================================ ======= ===== ======
mode           read   edit   command                          network MCP   own
============== ====== ====== ================================ ======= ===== ======
default        allow  ask    allow in the sandbox, else ask   ask     ask   allow
acceptEdits    allow  allow  allow in the sandbox, else ask   ask     ask   allow
plan           allow  deny   deny                             ask     deny  allow
dontAsk        allow  deny   allow in the sandbox, else deny  deny    deny  allow
bypass…        allow  allow  allow                            allow   allow allow
============== ====== ====== ================================ ======= ===== ======

A sub-agent's calls are decided under every mode of its chain (the main agent's, then each
role's ``permissionMode`` down to it) and the strictest answer wins, so a sub-agent never gets
more than its parent allows. Claude Code's ``auto`` (a classifier model approves calls) is not
offered: Retinue will not let one model vouch for another's actions; a role or setting that
says ``auto`` is read as ``default`` and reported.
"""

from __future__ import annotations

from typing import Literal, get_args

__all__ = [
    "MODES",
    "Decision",
    "Kind",
    "PermissionMode",
    "decide_by_mode",
    "kind_of",
    "parse_mode",
    "strictest",
]

PermissionMode = Literal["default", "acceptEdits", "plan", "dontAsk", "bypassPermissions"]
Decision = Literal["allow", "ask", "deny"]
Kind = Literal["read", "edit", "command", "network", "mcp", "own"]

MODES: tuple[PermissionMode, ...] = get_args(PermissionMode)
_STRICTNESS = {"allow": 0, "ask": 1, "deny": 2}

READ_TOOLS = frozenset(
    {
        "Read", "Glob", "Grep", "LS", "TodoWrite", "TodoRead", "NotebookRead", "Skill",
        "SubAgent", "UnloadSubAgent", "SubAgentStatus", "FindRole", "AskParent",
        "core_memory_append", "core_memory_replace", "archival_memory_insert",
        "archival_memory_search", "conversation_search", "ExitPlanMode",
        "SendMessage", "TaskCreate", "TaskList", "TaskGet", "TaskUpdate",
    }
)  # fmt: skip
EDIT_TOOLS = frozenset({"Write", "Edit", "MultiEdit", "NotebookEdit"})
COMMAND_TOOLS = frozenset({"Bash"})
NETWORK_TOOLS = frozenset({"WebFetch", "WebSearch"})

_BY_MODE: dict[PermissionMode, dict[Kind, Decision]] = {
    "default": {"read": "allow", "edit": "ask", "command": "ask", "network": "ask",
                "mcp": "ask", "own": "allow"},
    "acceptEdits": {"read": "allow", "edit": "allow", "command": "ask", "network": "ask",
                    "mcp": "ask", "own": "allow"},
    "plan": {"read": "allow", "edit": "deny", "command": "deny", "network": "ask",
             "mcp": "deny", "own": "allow"},
    "dontAsk": {"read": "allow", "edit": "deny", "command": "deny", "network": "deny",
                "mcp": "deny", "own": "allow"},
    "bypassPermissions": {"read": "allow", "edit": "allow", "command": "allow",
                          "network": "allow", "mcp": "allow", "own": "allow"},
}  # fmt: skip


def kind_of(tool: str) -> Kind:
    if tool in READ_TOOLS or tool.startswith("memory_"):
        return "read"
    if tool in EDIT_TOOLS:
        return "edit"
    if tool in COMMAND_TOOLS:
        return "command"
    if tool in NETWORK_TOOLS:
        return "network"
    if tool.startswith("mcp__"):
        return "mcp"
    return "own"


def decide_by_mode(mode: PermissionMode, kind: Kind, *, sandboxed: bool) -> Decision:
    """What ``mode`` says about a call of ``kind`` that no rule matched."""
    if kind == "command" and sandboxed and mode != "plan":
        return "allow"  # Claude Code's sandbox auto-allow: bwrap confines what it can do
    return _BY_MODE[mode][kind]


def strictest(*decisions: Decision) -> Decision:
    return max(decisions, key=_STRICTNESS.__getitem__)


def parse_mode(value: object, *, where: str = "permission mode") -> tuple[PermissionMode, str]:
    """A mode from a setting, and a problem to report ('' if none). Unknown → ``default``."""
    if isinstance(value, str) and value in MODES:
        return value, ""  # type: ignore[return-value]  # checked against MODES just above
    if value == "auto":
        return "default", f"{where}: 'auto' is not offered by Retinue; using 'default'"
    known = ", ".join(MODES)
    return "default", f"{where}: unknown mode {value!r} (known: {known}); using 'default'"
