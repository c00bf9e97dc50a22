"""Retinue: a runtime for LLM agents that delegate to role-defined sub-agents.

An agent in two lines::

    agent = retinue.Agent("openai:gpt-5.6-terra", instructions="Answer briefly.")
    print(agent.run_sync("What is Retinue?").content)

- :class:`Agent` — model, instructions, tools, code-defined :class:`Role` objects (beside role
  files), memory on/off; ``run()`` / ``run_sync()`` / ``stream()`` (an async iterator of
  typed events, then ``.output``): :data:`AgentEvent` is the union of :class:`TextDelta`,
  :class:`ToolStarted`, :class:`SessionChanged`... (subclasses of :class:`Event`), to ``match``.
- :func:`tool` — ``@tool`` or ``@tool("Name", "description")`` turns a typed function into a
  tool; a parameter annotated :class:`ToolContext` receives the call's context.
- :class:`Runtime` / :class:`Conversation` / :class:`Settings` — the layer ``Agent``, the CLI
  and the service are built on; :func:`run` / :class:`RunConfig` — the bare run loop.
- :func:`tune_for_serving` — the cyclic collector's settings for a process that runs
  thousands of sessions at once (``retinue serve`` calls it).
- ``Agent(output_type=...)`` / ``Role(output_type=...)`` make answers typed
  (:attr:`RunOutput.output`, :class:`SubAgentOutput`; :class:`OutputValidationError` when
  the model cannot comply); ``run(..., deps=x)`` reaches every tool as ``ctx.deps``.
- ``agent.conversation("id")`` is a :class:`SavedConversation`: kept in a
  :class:`ConversationStore` (``Agent(store=...)``), resumed by any process with the current
  instructions and its pending approvals, exported and imported as JSON
  (:class:`ConversationError` for a bad one).
- What ``Agent`` takes is here too: :class:`ModelSettings`, :data:`PermissionMode`,
  :data:`Approver` (given an :class:`ApprovalRequest`, answering a bool or an
  :class:`Approval`), :class:`Guard` (the program's checks, answering a :class:`Verdict` on a
  :class:`ModelRequest`, :class:`ToolRequest`, :class:`ToolResponse` or :class:`FinalAnswer`)
  and :data:`SettingSource`.
- :class:`ScriptedModel` — the scripted fake model for tests (``retinue.testing`` has its
  helpers); :class:`RetinueError` is the root of every error Retinue raises.

The names below are the curated public API (pinned by a test); the package is typed
(``py.typed``). They are loaded on first use, so that ``import retinue`` — and the
``retinue`` command's start-up — stay fast; type checkers see plain imports, so a misspelt
name is an error to them, not ``Any``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from retinue.agent import Agent, AgentStream
    from retinue.config import Settings
    from retinue.engine import RunConfig, RunOutput, run
    from retinue.engine.collector import tune_for_serving
    from retinue.engine.output import SubAgentOutput
    from retinue.errors import (
        ConfigError,
        ConversationError,
        MediaError,
        ModelError,
        OutputValidationError,
        RetinueError,
        RoleError,
        SubAgentError,
        ToolError,
    )
    from retinue.events import (
        AgentEvent,
        ApprovalAnswered,
        ApprovalRequested,
        Compressed,
        Consolidated,
        Event,
        EventSink,
        LimitReached,
        ModelCallFinished,
        ModelCallStarted,
        Notice,
        RunFinished,
        RunStarted,
        SessionAction,
        SessionChanged,
        TextDelta,
        ToolFinished,
        ToolStarted,
    )
    from retinue.llm import Model, ModelResponse, ToolSpec, resolve_model
    from retinue.llm.settings import ModelSettings
    from retinue.llm.testing import ScriptedModel
    from retinue.messages import (
        AssistantMessage,
        DocumentPart,
        ImagePart,
        Message,
        SystemMessage,
        ToolCall,
        ToolResultMessage,
        Usage,
        UserMessage,
    )
    from retinue.policy.approvals import Approval, ApprovalRequest, Approver
    from retinue.policy.guards import (
        FinalAnswer,
        Guard,
        ModelRequest,
        ToolRequest,
        ToolResponse,
        Verdict,
    )
    from retinue.policy.modes import PermissionMode
    from retinue.policy.settings import SettingSource
    from retinue.runtime import Conversation, Runtime
    from retinue.saved import SavedConversation
    from retinue.store.conversations import ConversationStore
    from retinue.subagents.roles import Role
    from retinue.tools import Tool, ToolContext, ToolRegistry, ToolResult, tool

    ModelCalled = ModelCallFinished  # deprecated names (at run time they warn)
    ModelStarted = ModelCallStarted
    SessionEvent = SessionChanged

_DEPRECATED = {
    "ModelCalled": "ModelCallFinished",
    "ModelStarted": "ModelCallStarted",
    "SessionEvent": "SessionChanged",
}
"""Renamed events' old names (old -> new), kept for one release and not in ``__all__``:
reading one warns (``docs/glossary.md``)."""
_HOMES = {
    "retinue.agent": ("Agent", "AgentStream"),
    "retinue.config": ("Settings",),
    "retinue.events": (
        "AgentEvent",
        "ApprovalAnswered",
        "ApprovalRequested",
        "Compressed",
        "Consolidated",
        "Event",
        "EventSink",
        "LimitReached",
        "ModelCallFinished",
        "ModelCallStarted",
        "Notice",
        "RunFinished",
        "RunStarted",
        "SessionAction",
        "SessionChanged",
        "TextDelta",
        "ToolFinished",
        "ToolStarted",
    ),
    "retinue.llm.testing": ("ScriptedModel",),
    "retinue.llm.settings": ("ModelSettings",),
    "retinue.runtime": ("Conversation", "Runtime"),
    "retinue.saved": ("SavedConversation",),
    "retinue.store.conversations": ("ConversationStore",),
    "retinue.subagents.roles": ("Role",),
    "retinue.engine": ("RunConfig", "RunOutput", "run"),
    "retinue.engine.collector": ("tune_for_serving",),
    "retinue.engine.output": ("SubAgentOutput",),
    "retinue.policy.approvals": ("Approval", "ApprovalRequest", "Approver"),
    "retinue.policy.guards": (
        "FinalAnswer",
        "Guard",
        "ModelRequest",
        "ToolRequest",
        "ToolResponse",
        "Verdict",
    ),
    "retinue.policy.modes": ("PermissionMode",),
    "retinue.policy.settings": ("SettingSource",),
    "retinue.errors": (
        "ConfigError",
        "ConversationError",
        "MediaError",
        "ModelError",
        "OutputValidationError",
        "RetinueError",
        "RoleError",
        "SubAgentError",
        "ToolError",
    ),
    "retinue.llm": ("Model", "ModelResponse", "ToolSpec", "resolve_model"),
    "retinue.messages": (
        "AssistantMessage",
        "DocumentPart",
        "ImagePart",
        "Message",
        "SystemMessage",
        "ToolCall",
        "ToolResultMessage",
        "Usage",
        "UserMessage",
    ),
    "retinue.tools": ("Tool", "ToolContext", "ToolRegistry", "ToolResult", "tool"),
}
_WHERE = {name: module for module, names in _HOMES.items() for name in names}


__all__ = [
    "Agent",
    "AgentEvent",
    "AgentStream",
    "Approval",
    "ApprovalAnswered",
    "ApprovalRequest",
    "ApprovalRequested",
    "Approver",
    "AssistantMessage",
    "Compressed",
    "ConfigError",
    "Consolidated",
    "Conversation",
    "ConversationError",
    "ConversationStore",
    "DocumentPart",
    "Event",
    "EventSink",
    "FinalAnswer",
    "Guard",
    "ImagePart",
    "LimitReached",
    "MediaError",
    "Message",
    "Model",
    "ModelCallFinished",
    "ModelCallStarted",
    "ModelError",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "Notice",
    "OutputValidationError",
    "PermissionMode",
    "RetinueError",
    "Role",
    "RoleError",
    "RunConfig",
    "RunFinished",
    "RunOutput",
    "RunStarted",
    "Runtime",
    "SavedConversation",
    "ScriptedModel",
    "SessionAction",
    "SessionChanged",
    "SettingSource",
    "Settings",
    "SubAgentError",
    "SubAgentOutput",
    "SystemMessage",
    "TextDelta",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolError",
    "ToolFinished",
    "ToolRegistry",
    "ToolRequest",
    "ToolResponse",
    "ToolResult",
    "ToolResultMessage",
    "ToolSpec",
    "ToolStarted",
    "Usage",
    "UserMessage",
    "Verdict",
    "resolve_model",
    "run",
    "tool",
    "tune_for_serving",
]


if not TYPE_CHECKING:  # hidden from type checkers: to them a name not imported above is unknown

    def __getattr__(name: str) -> Any:
        if name in _DEPRECATED:
            from retinue._deprecated import warn_renamed

            warn_renamed(f"retinue.{name}", f"retinue.{_DEPRECATED[name]}")
            return __getattr__(_DEPRECATED[name])
        module = _WHERE.get(name)
        if module is None:
            raise AttributeError(f"module 'retinue' has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
