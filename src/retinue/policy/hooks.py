"""Claude Code hooks: commands run at named events, speaking its JSON protocol.

(Placeholder interface; the runner is being written.) :class:`HookResult` is what one event's
hooks decided, merged; :class:`Hooks` runs the hooks configured for an event.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["HookResult", "Hooks"]


@dataclass(frozen=True, slots=True)
class HookResult:
    """What the hooks of one event said, merged.

    ``block``: a hook exited 2 or decided ``block`` / ``deny``; ``reason`` is what the model
    (or the user, for ``UserPromptSubmit``) is told. ``permission`` is a ``PreToolUse`` hook's
    ``permissionDecision``; ``context`` its ``additionalContext``; ``updated_input`` replaces
    the tool's arguments.
    """

    block: bool = False
    reason: str = ""
    permission: Literal["allow", "deny", "ask"] | None = None
    context: str = ""
    updated_input: dict[str, Any] | None = None


NOTHING = HookResult()


class Hooks:
    """The hooks configured for each event (none here yet)."""

    def __bool__(self) -> bool:
        return False

    async def run(
        self, event: str, payload: dict[str, Any], *, matcher_value: str | None = None
    ) -> HookResult:
        return NOTHING
