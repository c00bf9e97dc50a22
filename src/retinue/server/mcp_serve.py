"""Retinue's roles served over MCP (``retinue mcp serve``): any MCP client (Claude Code,
Cursor, another Retinue) delegates to them as Retinue's own agents do.

The tools are ``SubAgent``, ``UnloadSubAgent`` and ``SubAgentStatus``, the very tools of
:mod:`retinue.subagents.tools` run with the MCP client as the parent agent, so their
semantics are the same: interactive sessions keep their history between calls until the
client unloads them. When the client disconnects (stdio: its end of the pipe closes),
every session it still holds is consolidated into memory and closed (over streamable HTTP,
where a 2026 client has no connection to lose, when the server stops). The roles are also a
resource, ``retinue://roles`` (JSON: name and description of each). While a call runs, a
client that asked for progress gets one notification per event of the sub-agent tree (its
message is the event as JSON: ``kind``, ``agent_id``, and the event's data, ``parent_id``
included, from which the tree is built).

**Who the client is.** On stdio the client is one parent, ``mcp-client``. Over HTTP each
request's token decides (see :mod:`retinue.server.tokens`): the service's own token is the
parent ``mcp-client`` in the service's tenant, and a named token ``bo`` is the parent
``mcp-client-bo`` in its own tenant: its sessions, its memory and its progress notifications
are its own, and another token's holder can neither see nor unload them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from dataclasses import replace
from typing import Annotated, Any, TypeAlias

from mcp import types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError as McpToolError
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, Field

from retinue.errors import RetinueError
from retinue.events import TEXT_DELTA, Event
from retinue.policy.approvals import Approval, ApprovalRequest
from retinue.runtime import Runtime
from retinue.server.tokens import Principal
from retinue.subagents.tools import subagent, subagent_status, unload_subagent
from retinue.tools.base import Tool, ToolContext

__all__ = ["PARENT_ID", "build_server"]

RoleArg: TypeAlias = Annotated[
    str, Field(description="Name of one of the roles (see retinue://roles)")
]
InstanceArg: TypeAlias = Annotated[
    str | None, Field(description="Optional name to hold several sessions of one role")
]
PARENT_ID = "mcp-client"  # the agent id of the MCP client, parent of the sessions it opens


def client_context(runtime: Runtime, parent_id: str = PARENT_ID) -> ToolContext:
    s = runtime.settings
    return ToolContext(
        parent_id,
        s.workspace,
        s.home,
        role="main",
        tenant=s.tenant,
        call_chain=("main",),
        manager=runtime.manager,
        memory=runtime.memory,
        events=runtime.events,
    )


class Progress:
    """The event sink of the client's agents: each event goes, as a progress notification,
    to every call of the client that is running (a session keeps the sink it was made with,
    so later turns report to later calls)."""

    def __init__(self) -> None:
        self._queues: set[asyncio.Queue[Event | None]] = set()

    def __call__(self, event: Event) -> None:
        if event.kind != TEXT_DELTA:  # streamed text is too fine-grained for progress
            for q in self._queues:
                q.put_nowait(event)

    @asynccontextmanager
    async def reporting(self, mcp_ctx: Context[Any, Any]) -> AsyncIterator[None]:
        queue: asyncio.Queue[Event | None] = asyncio.Queue()

        async def forward() -> None:
            sent = 0
            while (event := await queue.get()) is not None:
                sent += 1
                with suppress(Exception):  # a client that went away is not our failure
                    await mcp_ctx.report_progress(sent, None, json.dumps(event.to_dict()))

        self._queues.add(queue)
        async with asyncio.TaskGroup() as group:
            group.create_task(forward())
            try:
                yield
            finally:
                self._queues.discard(queue)
                queue.put_nowait(None)


class Clients:
    """The parents the MCP clients are: one per token (one in all on stdio), each with its
    tool context and its progress sink, made on its first call."""

    def __init__(self, runtime: Runtime, parent_id: str = PARENT_ID) -> None:
        self.runtime = runtime
        self.parent_id = parent_id
        self._by_key: dict[
            tuple[str | None, str | None], tuple[ToolContext, Progress, Approvals]
        ] = {}

    def of(self, principal: Principal | None) -> tuple[ToolContext, Progress, Approvals]:
        """The context and progress sink of the client ``principal`` (None: stdio, or the
        service's own token)."""
        who = principal or Principal()
        key = (who.name, who.tenant)
        found = self._by_key.get(key)
        if found is None:
            parent = self.parent_id if who.name is None else f"{self.parent_id}-{who.name}"
            progress, approvals = Progress(), Approvals()
            base = client_context(self.runtime, parent)
            policy = self.runtime.policy
            gate = policy.with_approver(approvals) if policy is not None else None
            ctx = replace(base, tenant=who.tenant or base.tenant, events=progress, gate=gate)
            found = self._by_key[key] = (ctx, progress, approvals)
        return found

    def parents(self) -> list[str]:
        return [ctx.agent_id for ctx, _, _ in self._by_key.values()] or [self.parent_id]


class ApprovalForm(BaseModel):
    """What an MCP client is asked when a sub-agent's call needs a person's yes."""

    allow: bool = Field(description="Let this call run")
    always: bool = Field(default=False, description="Allow calls like it from now on")
    reason: str = Field(default="", description="If not: why (the sub-agent is told)")


class Approvals:
    """The approver of one client's agents: asks the client, by elicitation, in the call
    of that client that is running now (the latest, when several are)."""

    def __init__(self) -> None:
        self._calls: list[Context[Any, Any]] = []

    @contextmanager
    def calling(self, mcp_ctx: Context[Any, Any]) -> Iterator[None]:
        self._calls.append(mcp_ctx)
        try:
            yield
        finally:
            self._calls.remove(mcp_ctx)

    async def __call__(self, request: ApprovalRequest) -> Approval:
        mcp_ctx = self._calls[-1] if self._calls else None
        if mcp_ctx is None or not _can_elicit(mcp_ctx):
            return Approval(False, message=NO_ELICITATION)
        try:
            result = await mcp_ctx.elicit(f"Approve? {request.describe()}", ApprovalForm)
        except (MCPError, ValueError) as exc:
            return Approval(False, message=f"the MCP client could not be asked: {exc}")
        data = result.data if result.action == "accept" else None
        if data is None or not data.allow:
            why = data.reason if data is not None else f"the client answered {result.action!r}"
            return Approval(False, message=why[:500])
        return Approval(True, always=data.always)


NO_ELICITATION = (
    "the MCP client cannot be asked (it does not declare elicitation): allow the call with a "
    "rule in .claude/settings.json or start `retinue mcp serve --permission-mode acceptEdits`"
)


def _can_elicit(mcp_ctx: Context[Any, Any]) -> bool:
    try:
        session = mcp_ctx.request_context.session
        wanted = types.ClientCapabilities(elicitation=types.ElicitationCapability())
        return session.check_client_capability(wanted)
    except Exception:  # no session (stateless HTTP), or an SDK that moved: cannot ask
        return False


def principal_of(mcp_ctx: Context[Any, Any]) -> Principal | None:
    """The token's principal of an HTTP call (the Guard put it in the request's scope)."""
    try:
        request = mcp_ctx.request_context.request
    except ValueError:
        return None
    scope = getattr(request, "scope", None)
    state = scope.get("state") if isinstance(scope, dict) else None
    found = state.get("principal") if isinstance(state, dict) else None
    return found if isinstance(found, Principal) else None


async def _run(t: Tool, clients: Clients, mcp_ctx: Context[Any, Any], **arguments: Any) -> str:
    """One of Retinue's own tools, run as the calling client, its events as progress, its
    failures as MCP tool errors."""
    ctx, progress, approvals = clients.of(principal_of(mcp_ctx))
    raw = json.dumps({k: v for k, v in arguments.items() if v})
    async with progress.reporting(mcp_ctx):  # (a task group: what it raises comes grouped)
        with approvals.calling(mcp_ctx):
            try:
                return await t.invoke(ctx, raw)
            except RetinueError as exc:
                failure = str(exc)
    raise McpToolError(failure)


def build_server(runtime: Runtime, parent_id: str = PARENT_ID) -> MCPServer[Any]:
    """The MCP server of ``runtime``'s roles; its lifespan ends the client's sessions."""
    clients = Clients(runtime, parent_id)

    @asynccontextmanager
    async def lifespan(_server: MCPServer[Any]) -> AsyncIterator[None]:
        try:
            yield
        finally:
            for parent in clients.parents():
                await runtime.manager.cleanup(parent)
            await runtime.tools.close_sources()

    roles = "\n".join(f"- {r.name}: {r.description}" for r in runtime.catalog.roles.values())
    server: MCPServer[Any] = MCPServer(
        "retinue",
        instructions=f"Retinue's sub-agents. Roles:\n{roles or '(none)'}",
        lifespan=lifespan,
    )

    @server.tool(name="SubAgent", description=f"{subagent.description}\n\nRoles:\n{roles}")
    async def delegate(
        task: Annotated[str, Field(description="The task or message for the sub-agent")],
        role: RoleArg,
        interactive: Annotated[
            bool, Field(description="Keep the session for later calls, until UnloadSubAgent")
        ] = False,
        instance: InstanceArg = None,
        *,
        mcp_ctx: Context[Any, Any],
    ) -> str:
        return await _run(subagent, clients, mcp_ctx, task=task, role=role,
                          interactive=interactive, instance=instance)  # fmt: skip

    @server.tool(name="UnloadSubAgent", description=unload_subagent.description)
    async def unload(
        role: RoleArg, instance: InstanceArg = None, *, mcp_ctx: Context[Any, Any]
    ) -> str:
        return await _run(unload_subagent, clients, mcp_ctx, role=role, instance=instance)

    @server.tool(name="SubAgentStatus", description=subagent_status.description)
    async def status(
        role: RoleArg, instance: InstanceArg = None, *, mcp_ctx: Context[Any, Any]
    ) -> str:
        return await _run(subagent_status, clients, mcp_ctx, role=role, instance=instance)

    @server.resource("retinue://roles", name="roles", mime_type="application/json")
    def role_list() -> str:
        return json.dumps(
            [{"name": r.name, "description": r.description} for r in runtime.catalog.roles.values()]
        )

    del delegate, unload, status, role_list  # registered on the server
    return server
