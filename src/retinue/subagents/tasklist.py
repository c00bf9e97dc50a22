"""The ``TaskCreate``, ``TaskList``, ``TaskGet`` and ``TaskUpdate`` tools: the shared task list
of a parent tree (a "team": the main agent and every session under it), with Claude Code's
tool names. The list lives in the memory store (:mod:`retinue.store.tasks`), keyed by the
tenant and the tree's main agent id, so it outlasts a run; claiming a task (``TaskUpdate``
with ``status="in_progress"`` or an ``owner``) is atomic there."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated

from pydantic import Field

from retinue.errors import RetinueError, ToolError
from retinue.store.tasks import Task, TaskStore, task_store
from retinue.subagents.messaging import messenger_of
from retinue.subagents.registry import registry_of
from retinue.subagents.team import teams_of
from retinue.tools.base import Tool, ToolContext, tool

__all__ = [
    "TASK_TOOL_NAMES",
    "format_task",
    "release_tasks",
    "task_lists",
    "task_store",
    "task_tools",
    "team_of",
]

TASK_TOOL_NAMES = frozenset({"TaskCreate", "TaskList", "TaskGet", "TaskUpdate"})


def team_of(ctx: ToolContext) -> str:
    """The id of the tree's main agent: whose task list ``ctx``'s agent shares."""
    registry = registry_of(ctx.manager)
    if registry is None:
        return ctx.agent_id
    return messenger_of(registry).root_of(ctx.agent_id)


def _store(ctx: ToolContext) -> TaskStore:
    store = task_store(ctx.memory)
    if store is None:
        raise ToolError("the shared task list needs the memory store, which is off in this run")
    return store


def format_task(task: Task, *, full: bool = False) -> str:
    line = f"#{task.id} [{task.status}] {task.subject}"
    extra = [f"owner: {task.owner}"] if task.owner else []
    if task.blocked_by:
        extra.append("blocked by " + ", ".join(f"#{i}" for i in task.blocked_by))
    if extra:
        line += f" ({'; '.join(extra)})"
    return f"{line}\n{task.description}" if full and task.description else line


@tool("TaskCreate")
async def task_create(
    ctx: ToolContext,
    subject: Annotated[str, Field(description="A short title, in the imperative")],
    description: Annotated[str, Field(description="What is to be done, and how to tell")] = "",
    blocked_by: Annotated[
        list[int], Field(description="Ids of tasks that must be completed before this one")
    ] = [],  # noqa: B006 (pydantic copies defaults)
) -> str:
    """Add a task to your team's shared task list (pending, unowned)."""
    try:
        task = await _store(ctx).create(ctx.tenant, team_of(ctx), subject, description,
                                        blocked_by)  # fmt: skip
    except RetinueError as exc:
        raise ToolError(str(exc)) from None
    return f"created {format_task(task)}"


@tool("TaskList")
async def task_list(ctx: ToolContext) -> str:
    """Your team's shared task list: every task's id, status, subject, owner, dependencies."""
    try:
        tasks = await _store(ctx).list(ctx.tenant, team_of(ctx))
    except RetinueError as exc:
        raise ToolError(str(exc)) from None
    return "\n".join(format_task(t) for t in tasks) or "the task list is empty"


@tool("TaskGet")
async def task_get(ctx: ToolContext, id: Annotated[int, Field(description="The task's id")]) -> str:
    """One task of your team's list, with its description."""
    try:
        task = await _store(ctx).get(ctx.tenant, team_of(ctx), id)
    except RetinueError as exc:
        raise ToolError(str(exc)) from None
    if task is None:
        raise ToolError(f"no task #{id} in this list; TaskList shows them")
    return format_task(task, full=True)


@tool("TaskUpdate")
async def task_update(
    ctx: ToolContext,
    id: Annotated[int, Field(description="The task's id")],
    status: Annotated[
        str | None,
        Field(
            description="pending, in_progress (claims it for you: refused if another has "
            "it or its dependencies are not completed) or completed"
        ),
    ] = None,
    owner: Annotated[
        str | None,
        Field(description="Give it to this session id or teammate (claims it); '' releases it"),
    ] = None,
) -> str:
    """Claim, hand over, release or complete a task of your team's list."""
    registry = registry_of(ctx.manager)
    if registry is not None:  # a teammate's name, or team-lead: the session id it stands for
        owner = teams_of(registry).owner_id(ctx.tenant, ctx.agent_id, owner)
    try:
        task = await _store(ctx).update(ctx.tenant, team_of(ctx), id, actor=ctx.agent_id,
                                        status=status, owner=owner)  # fmt: skip
    except RetinueError as exc:
        raise ToolError(str(exc)) from None
    return f"updated {format_task(task)}"


async def task_lists(
    memory: object, tenant: str, teams: Iterable[str], *, most: int = 50
) -> dict[str, list[Task]]:
    """The stored lists of ``teams`` (main agent ids) that hold tasks, for display: at most
    ``most`` teams are read (each list is bounded by the store)."""
    store = task_store(memory)
    if store is None:
        return {}
    out: dict[str, list[Task]] = {}
    for team in list(dict.fromkeys(teams))[:most]:
        if tasks := await store.list(tenant, team):
            out[team] = tasks
    return out


async def release_tasks(memory: object, tenant: str, team: str, agent_id: str) -> list[int]:
    """Put back what ``agent_id``, whose session ends, holds and did not complete: those
    tasks of ``team``'s list turn pending and unowned, for another to claim. The ids."""
    store = task_store(memory)
    if store is None:
        return []
    return await store.release(tenant, team, agent_id)


def task_tools() -> tuple[Tool, ...]:
    return task_create, task_list, task_get, task_update
