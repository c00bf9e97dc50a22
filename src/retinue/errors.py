"""Every error Retinue raises on purpose derives from :class:`RetinueError`.

The whole tree::

    RetinueError
    ├── ConfigError            a setting is missing or wrong (names the setting to fix)
    ├── ModelError             a model provider failed (after the SDK's retries)
    │   ├── ContextTooLongError    the request did not fit the model's context window
    │   ├── ModelRefusal           the model declined to answer (a safety refusal)
    │   └── ScriptError            the scripted test model was misused (unscripted call, ...)
    ├── ToolError              a tool could not do what it was asked; the model sees the message
    │   └── WorkspaceError         a path or command left the workspace root
    ├── RoleError              a role file is broken, or a role is unknown
    ├── SubAgentError          delegation refused: depth, cycle, unknown session, ...
    ├── OutputValidationError  the model's answers kept failing the run's output type
    ├── MediaError             an image or document is too large, corrupt or of another type
    ├── SessionError           a session refused a turn (token budget spent, empty message)
    │   └── SessionClosedError     the session was closed before the turn could begin
    ├── ConversationError      a saved conversation is unknown, or an export is not one
    ├── MemoryStoreError       the memory store refused or failed a read or write
    │   ├── BlockLimitError        a core-memory block would exceed its size limit
    │   └── BlockConflictError     a core block changed meanwhile and the edits do not merge
    └── PolicyError            a permission rule, hook or trust definition is broken
        └── UntrustedError         a command the workspace defines has not been approved

Control flow is not an error: cancellation is plain :class:`asyncio.CancelledError`, and a
run that stops at ``max_iterations`` returns normally with ``stop_reason`` saying so.
"""

from __future__ import annotations

__all__ = [
    "BlockConflictError",
    "BlockLimitError",
    "ConfigError",
    "ContextTooLongError",
    "ConversationError",
    "MediaError",
    "MemoryStoreError",
    "ModelError",
    "ModelRefusal",
    "OutputValidationError",
    "PolicyError",
    "RetinueError",
    "RoleError",
    "ScriptError",
    "SessionClosedError",
    "SessionError",
    "SubAgentError",
    "ToolError",
    "UntrustedError",
    "WorkspaceError",
]


class RetinueError(Exception):
    """Root of every error Retinue raises on purpose."""


class ConfigError(RetinueError):
    """A setting is missing or wrong; the message names the setting to fix."""


class ModelError(RetinueError):
    """A model provider failed after its retries; the message says why in one line."""

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


class ContextTooLongError(ModelError):
    """The provider refused the request because it exceeds the context window."""


class ModelRefusal(ModelError):
    """The model declined the request (Anthropic's ``stop_reason: "refusal"``, OpenAI's
    ``refusal`` output): an answer that is not one, reported instead of an empty reply."""


class ScriptError(ModelError):
    """The scripted test model was called without a scripted reply, or left replies unused."""


class ToolError(RetinueError):
    """Raised by a tool to report a failure the model should read and recover from."""


class WorkspaceError(ToolError):
    """A path or command tried to leave the workspace root."""


class RoleError(RetinueError):
    """A role file is broken or a role name is unknown."""


class SubAgentError(RetinueError):
    """Delegation was refused (depth limit, cycle, unknown session, ...)."""


class OutputValidationError(RetinueError):
    """The model's final answer did not match the output type, after the retries allowed;
    ``errors`` holds the last validation errors, one per line."""

    def __init__(self, message: str, *, errors: str = "") -> None:
        super().__init__(message)
        self.errors = errors


class SessionError(RetinueError):
    """A session refused a turn: its token budget is spent, or the message is empty."""


class SessionClosedError(SessionError):
    """The session was closed (or began closing) before this turn could begin."""


class ConversationError(RetinueError):
    """A saved conversation is not there (resumed strictly), a conversation export is
    corrupt or of another kind, or a stored approval cannot be answered; nothing was stored."""


class MemoryStoreError(RetinueError):
    """The memory store refused or failed an operation."""


class BlockLimitError(MemoryStoreError):
    """A core memory block would grow past its size limit."""


class BlockConflictError(MemoryStoreError):
    """A core block changed since it was read and the two edits could not be merged."""


class PolicyError(RetinueError):
    """A permission rule, a hook or a trust definition is broken; the message names its file."""


class UntrustedError(PolicyError):
    """A command that a workspace file defines (``.mcp.json``, a role's ``mcpServers``, a
    project hook) has not been approved; the message names the file and how to approve it."""


class MediaError(RetinueError, ValueError):
    """An image or document is too large, corrupt (its bytes are not its type) or of a type
    no model takes; the message is one line and names the part."""
