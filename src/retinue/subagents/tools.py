"""The ``SubAgent``, ``UnloadSubAgent`` and ``SubAgentStatus`` tools, and every sentence about
sub-agents the model reads: tool descriptions, the roles section of a parent's prompt, and
the texts the manager answers with."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from pydantic import Field

from retinue.errors import ToolError
from retinue.tools.base import Delegator, Tool, ToolContext, tool

if TYPE_CHECKING:
    from retinue.engine.session import Consolidation
    from retinue.subagents.roles import RoleCatalog

__all__ = [
    "SPAWN_TOOL_NAMES",
    "background_note",
    "roles_section",
    "status_text",
    "subagent_tools",
    "unknown_session",
    "unload_confirmation",
    "waiting_note",
]

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


# -- what the manager answers with -------------------------------------------------------


def roles_section(catalog: RoleCatalog) -> str:
    """The part of a parent's system prompt that lists whom it can delegate to."""
    return (
        "## Sub-agents\n"
        "You can delegate with the SubAgent tool (task, role). Pass interactive=true to keep "
        "the sub-agent for a multi-turn conversation (and instance=... for several sessions of "
        "one role); end such a session with UnloadSubAgent when you are done with it. With "
        "interactive=true and background=true the sub-agent works while you go on; collect its "
        "reply with SubAgentStatus.\n"
        f"Available roles:\n{catalog.describe()}"
    )


def _how(role: str, instance: str | None) -> str:
    return f"role={role!r}" + (f", instance={instance!r}" if instance else "")


def waiting_note(reply: str, cid: str, role: str, instance: str | None) -> str:
    how = _how(role, instance)
    return (
        f"{reply}\n\n[interactive session {cid} is waiting for your next message: "
        f"continue with SubAgent({how}, interactive=true, task=...), "
        f"end it with UnloadSubAgent({how})]"
    )


def background_note(cid: str, role: str, instance: str | None) -> str:
    return (
        f"[interactive session {cid} is working on it in the background: collect its "
        f"reply with SubAgentStatus({_how(role, instance)}) (wait=true blocks until it is done)]"
    )


def status_text(cid: str, state: str, turns: int, pending: int, replies: list[str]) -> str:
    head = f"Session {cid}: {state}, {turns} turn(s) done"
    if pending:
        head += f", {pending} background turn(s) still to finish"
    if not replies:
        return head + "; no new replies."
    numbered = "\n\n".join(f"[{i}] {r}" for i, r in enumerate(replies, 1))
    return f"{head}. New replies:\n\n{numbered}"


def unload_confirmation(cid: str, turns: int, outcome: Consolidation) -> str:
    """What the parent reads after an unload: what really happened to the memory."""
    head = f"Session {cid} ended after {turns} turn(s); "
    if outcome == "done":
        return head + "what it learned was consolidated into its memory."
    if outcome == "failed":
        return head + (
            "consolidating its memory failed (the transcript is kept and "
            "`retinue memory retry` writes it later)."
        )
    return head + "no memory is configured, so nothing of it was kept."


def unknown_session(cid: str, live: list[str]) -> str:
    return (
        f"no interactive session {cid!r}; this agent's live sessions: {', '.join(live) or 'none'}"
    )
