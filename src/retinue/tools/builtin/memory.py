"""Memory tools, named as Letta names them, for roles with the ``memory`` capability.

``core_memory_append`` / ``core_memory_replace`` edit a core block (always in the prompt);
``archival_memory_insert`` / ``archival_memory_search`` store and recall passages. Each acts
on the calling agent's own scope, ``(ctx.tenant, ctx.role)``, through ``ctx.memory``; a write
over a block's limit comes back to the model as an error result saying what to do.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from retinue.errors import ToolError
from retinue.memory.store import MemoryStore
from retinue.telemetry import trace as _tel
from retinue.tools.base import Tool, ToolContext, tool

__all__ = [
    "archival_memory_insert",
    "archival_memory_search",
    "core_memory_append",
    "core_memory_replace",
    "memory_tools",
]


def _store(ctx: ToolContext) -> MemoryStore:
    if not isinstance(ctx.memory, MemoryStore):
        raise ToolError("long-term memory is not available to this agent")
    return ctx.memory


def _usage(name: str, value: str, limit: int) -> str:
    return f"block {name!r} now holds {len(value)}/{limit} characters"


@tool("core_memory_append")
async def core_memory_append(
    ctx: ToolContext,
    block: Annotated[str, Field(description="block name, e.g. persona, human, working_context")],
    content: Annotated[str, Field(description="text to add as a new line at the block's end")],
) -> str:
    """Append text to one of your core memory blocks (always shown in your prompt)."""
    with _tel.span("memory update_block", **{"gen_ai.agent.name": ctx.role}):
        b = await _store(ctx).append_block(ctx.tenant, ctx.role, block, content)
    return f"Appended; {_usage(b.name, b.value, b.limit)}."


@tool("core_memory_replace")
async def core_memory_replace(
    ctx: ToolContext,
    block: Annotated[str, Field(description="block name, e.g. persona, human, working_context")],
    old: Annotated[str, Field(description="exact text currently in the block")],
    new: Annotated[str, Field(description="replacement text (empty to delete)")],
) -> str:
    """Replace text in one of your core memory blocks (every occurrence of ``old``)."""
    with _tel.span("memory update_block", **{"gen_ai.agent.name": ctx.role}):
        b = await _store(ctx).replace_in_block(ctx.tenant, ctx.role, block, old, new)
    return f"Replaced; {_usage(b.name, b.value, b.limit)}."


@tool("archival_memory_insert")
async def archival_memory_insert(
    ctx: ToolContext,
    content: Annotated[str, Field(description="a self-contained fact worth recalling later")],
) -> str:
    """Save a passage to your archival memory (unbounded, found by archival_memory_search)."""
    p = await _store(ctx).insert_passage(ctx.tenant, ctx.role, content, source="agent")
    if p is None:
        return "Not stored: archival memory already holds this passage."
    return f"Stored as passage #{p.id}."


@tool("archival_memory_search")
async def archival_memory_search(
    ctx: ToolContext,
    query: Annotated[str, Field(description="words to look for")],
    limit: Annotated[int, Field(ge=1, le=50, description="most passages to return")] = 5,
) -> str:
    """Search your archival memory; returns the best-matching passages, best first."""
    with _tel.span("memory search", **{"gen_ai.agent.name": ctx.role}):
        hits = await _store(ctx).search(ctx.tenant, ctx.role, query, limit)
    if not hits:
        return f"No archival passages match {query!r}."
    return "\n".join(f"[{i}] (#{p.id}) {p.content}" for i, p in enumerate(hits, 1))


def memory_tools() -> list[Tool]:
    """The four memory tools."""
    return [core_memory_append, core_memory_replace, archival_memory_insert, archival_memory_search]
