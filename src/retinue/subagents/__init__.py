"""Sub-agents: roles, one-shot delegation and interactive sessions."""

from retinue.subagents.caps import FanOutLimits
from retinue.subagents.manager import SubAgentManager
from retinue.subagents.registry import SessionInfo, conversation_id
from retinue.subagents.roles import Role, RoleCatalog, RoleProblem, parse_role, role_dirs
from retinue.subagents.tools import roles_section, subagent_tools

__all__ = [
    "FanOutLimits",
    "Role",
    "RoleCatalog",
    "RoleProblem",
    "SessionInfo",
    "SubAgentManager",
    "conversation_id",
    "parse_role",
    "role_dirs",
    "roles_section",
    "subagent_tools",
]
