"""Sub-agents: roles, one-shot delegation and interactive sessions."""

from retinue.subagents.manager import SubAgentManager, roles_section
from retinue.subagents.roles import Role, RoleCatalog, RoleProblem, parse_role, role_dirs
from retinue.subagents.session import SessionInfo, conversation_id
from retinue.subagents.tools import subagent_tools

__all__ = [
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
