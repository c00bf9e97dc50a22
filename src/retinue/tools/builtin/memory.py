"""Memory tools, named as Letta names them, for roles with the ``memory`` capability.

``core_memory_append`` / ``core_memory_replace`` edit a core block (always in the prompt);
``archival_memory_insert`` / ``archival_memory_search`` store and recall passages. Each acts
on the calling agent's own scope, ``(ctx.tenant, ctx.role)``, through ``ctx.memory``; a write
over a block's limit comes back to the model as an error result saying what to do.

The two core tools also reach the tenant's *shared blocks* that the agent's role declares
(``ctx.shared_memory``), by name: a writable one is changed in one transaction like an own
block; a read-only one is refused with an error result that says so.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from retinue.errors import ToolError
from retinue.memory.common import appending, replacing
from retinue.memory.store import MemoryStore, SharedMemoryStore
from retinue.telemetry import trace as _tel
from retinue.tools.base import Tool, ToolContext, tool

__all__ = [
    "archival_memory_insert",
    "archival_memory_search",
    "core_memory_append",
    "core_memory_replace",
    "memory_tools",
]


_BLOCK = "block name: persona, human, working_context, or a shared block shown in your prompt"


def _store(ctx: ToolContext) -> MemoryStore:
    if not isinstance(ctx.memory, MemoryStore):
        raise ToolError("long-term memory is not available to this agent")
    return ctx.memory


def _usage(name: str, value: str, limit: int) -> str:
    return f"block {name!r} now holds {len(value)}/{limit} characters"


def _shared(ctx: ToolContext, block: str) -> SharedMemoryStore | None:
    """The store to change shared ``block`` in, when the role declares it; None when it is
    not one of the role's shared blocks. A read-only one is a :class:`ToolError`."""
    declared = next((s for s in ctx.shared_memory if s.name == block), None)
    if declared is None:
        return None
    if not declared.writable:
        raise ToolError(
            f"block {block!r} is shared with role {ctx.role!r} read-only (its role file says "
            "write: false), so it cannot be changed here; say what should change in your answer"
        )
    if not isinstance(ctx.memory, SharedMemoryStore):
        raise ToolError("shared memory is not available to this agent")
    return ctx.memory


@tool("core_memory_append")
async def core_memory_append(
    ctx: ToolContext,
    block: Annotated[str, Field(description=_BLOCK)],
    content: Annotated[str, Field(description="text to add as a new line at the block's end")],
) -> str:
    """Append text to one of your core memory blocks (always shown in your prompt)."""
    shared = _shared(ctx, block)
    with _tel.span("memory update_block", **{"gen_ai.agent.name": ctx.role}):
        if shared is not None:
            b = await shared.edit_shared_block(ctx.tenant, block, appending(content))
        else:
            b = await _store(ctx).append_block(ctx.tenant, ctx.role, block, content)
    return f"Appended; {_usage(b.name, b.value, b.limit)}."


@tool("core_memory_replace")
async def core_memory_replace(
    ctx: ToolContext,
    block: Annotated[str, Field(description=_BLOCK)],
    old: Annotated[str, Field(description="exact text currently in the block")],
    new: Annotated[str, Field(description="replacement text (empty to delete)")],
) -> str:
    """Replace text in one of your core memory blocks (every occurrence of ``old``)."""
    shared = _shared(ctx, block)
    with _tel.span("memory update_block", **{"gen_ai.agent.name": ctx.role}):
        if shared is not None:
            b = await shared.edit_shared_block(ctx.tenant, block, replacing(block, old, new))
        else:
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
