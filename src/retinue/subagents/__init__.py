"""Sub-agents: roles, one-shot delegation and interactive sessions.

``conversation_id`` is the deprecated name of :func:`agent_id` (a session's agent id),
kept for one release.
"""

from typing import TYPE_CHECKING

from retinue._deprecated import module_aliases
from retinue.subagents.caps import FanOutLimits
from retinue.subagents.manager import SubAgentManager
from retinue.subagents.registry import SessionInfo, agent_id
from retinue.subagents.roles import Role, RoleCatalog, RoleProblem, parse_role, role_dirs
from retinue.subagents.tools import roles_section, subagent_tools

__all__ = [
    "FanOutLimits",
    "Role",
    "RoleCatalog",
    "RoleProblem",
    "SessionInfo",
    "SubAgentManager",
    "agent_id",
    "parse_role",
    "role_dirs",
    "roles_section",
    "subagent_tools",
]

if TYPE_CHECKING:  # the deprecated name, for type checkers (at run time it warns)
    conversation_id = agent_id
else:
    __getattr__ = module_aliases(__name__, {"conversation_id": "agent_id"})
