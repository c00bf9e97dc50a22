"""The ``SubAgent`` and ``UnloadSubAgent`` tools (names and parameters as the design has them)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from retinue.errors import ToolError
from retinue.tools.base import Delegator, Tool, ToolContext, tool

__all__ = ["SPAWN_TOOL_NAMES", "subagent_tools"]

SPAWN_TOOL_NAMES = frozenset({"SubAgent", "UnloadSubAgent", "SubAgentStatus"})


def _manager(ctx: ToolContext) -> Delegator:
    if ctx.manager is None:
        raise ToolError("sub-agents are not available in this run")
    return ctx.manager


@tool("SubAgent")
async def subagent(
    ctx: ToolContext,
    task: Annotated[str, Field(description="The task or message for the sub-agent")],
    role: Annotated[str, Field(description="Name of one of the available roles")],
    interactive: Annotated[
        bool,
        Field(
            description="If true, keep the sub-agent alive for a multi-turn conversation: "
            "later SubAgent calls with the same role (and instance) continue it. "
            "Use UnloadSubAgent to end it."
        ),
    ] = False,
    instance: Annotated[
        str | None,
        Field(description="Optional name to hold several interactive sessions of one role"),
    ] = None,
    background: Annotated[
        bool,
        Field(
            description="With interactive=true: return at once and let the sub-agent work "
            "while you go on; collect its reply later with SubAgentStatus"
        ),
    ] = False,
) -> str:
    """Delegate a task to a sub-agent with a predefined role and return its answer.

    One-shot by default: the sub-agent works in a fresh conversation and its answer comes
    back. With interactive=true the sub-agent keeps its conversation between calls.
    """
    return await _manager(ctx).delegate(
        ctx,
        task=task,
        role=role,
        interactive=interactive,
        instance=instance,
        background=background,
    )


@tool("UnloadSubAgent")
async def unload_subagent(
    ctx: ToolContext,
    role: Annotated[str, Field(description="Role name of the interactive sub-agent to end")],
    instance: Annotated[
        str | None, Field(description="The instance name, if the session was given one")
    ] = None,
) -> str:
    """End an interactive sub-agent session and consolidate its memory.

    The sub-agent's conversation learnings are persisted to its memory system.
    """
    return await _manager(ctx).unload(ctx, role, instance)


@tool("SubAgentStatus")
async def subagent_status(
    ctx: ToolContext,
    role: Annotated[str, Field(description="Role name of the interactive sub-agent")],
    instance: Annotated[
        str | None, Field(description="The instance name, if the session was given one")
    ] = None,
    wait: Annotated[
        bool, Field(description="Wait until its background turns have finished")
    ] = False,
) -> str:
    """Check an interactive sub-agent session: whether it is still working, and the replies
    of background turns that finished since you last checked."""
    return await _manager(ctx).poll(ctx, role, instance, wait=wait)


def subagent_tools() -> tuple[Tool, ...]:
    return subagent, unload_subagent, subagent_status
