"""Retinue's roles over A2A v1: the agent card, and the executor that runs a role for each
message (see :mod:`retinue.a2a`)."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import replace
from typing import Any

from a2a.auth.user import User
from a2a.helpers.proto_helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import (
    DefaultServerCallContextBuilder,
    create_agent_card_routes,
    create_jsonrpc_routes,
)
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Message,
    Part,
    TaskState,
)
from google.protobuf import json_format
from starlette.applications import Starlette
from starlette.requests import Request

from retinue.errors import RetinueError
from retinue.events import TEXT_DELTA, Event
from retinue.mcp.client import retinue_version
from retinue.mcp.server.serve import client_context
from retinue.runtime import Runtime
from retinue.server.tokens import Principal
from retinue.subagents.registry import SessionKey
from retinue.tools.base import ToolContext

__all__ = ["PARENT_ID", "RoleExecutor", "agent_card", "build_app"]

log = logging.getLogger("retinue.a2a")
PARENT_ID = "a2a-client"  # the agent id of the A2A client, parent of its contexts' sessions
MAX_MESSAGE = 100_000  # characters of one incoming message that reach a sub-agent
MAX_EVENT = 2_000  # characters of one event's JSON in a status update


def agent_card(runtime: Runtime, url: str) -> AgentCard:
    """One card for the service; its skills are the roles."""
    skills = [
        AgentSkill(id=r.name, name=r.name, description=r.description[:2_000], tags=["role"])
        for r in runtime.catalog.roles.values()
    ]
    return AgentCard(
        name="retinue",
        description="Retinue's sub-agents; name one in the message's metadata.role",
        version=retinue_version(),
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=skills,
    )


class TokenUser(User):
    """The holder of a token (the Guard's principal): the owner of its tasks in the SDK's
    task store, so another token's holder can neither get nor cancel them."""

    def __init__(self, principal: Principal | None) -> None:
        self.principal = principal

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        who = self.principal
        return "service" if who is None or who.name is None else f"token:{who.name}"


class TokenContextBuilder(DefaultServerCallContextBuilder):
    """Each call's user is its token's holder (see :class:`TokenUser`)."""

    def build_user(self, request: Request) -> User:
        state = request.scope.get("state")
        found = state.get("principal") if isinstance(state, dict) else None
        return TokenUser(found if isinstance(found, Principal) else None)


def _instance(context_id: str) -> str:
    """A context id as a session instance name (bounded, plain characters)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", context_id)[:64] or "context"


def _metadata(context: RequestContext) -> dict[str, Any]:
    """The request's metadata with the message's over it: the a2a-sdk client puts per-message
    data on the message (``Message.metadata``), others on the request
    (``SendMessageRequest.metadata``); both are read, the message's wins."""
    merged = dict(context.metadata)
    message = context.message
    if message is not None and message.HasField("metadata"):
        merged.update(json_format.MessageToDict(message.metadata))
    return merged


class RoleExecutor(AgentExecutor):
    """Runs a role for each A2A message, the context being an interactive session held by
    the A2A client: ``a2a-client`` for the service's token, ``a2a-client-<name>`` in its own
    tenant for a named token."""

    def __init__(self, runtime: Runtime, parent_id: str = PARENT_ID) -> None:
        self.runtime = runtime
        self.parent_id = parent_id
        self._running: dict[str, str] = {}  # task id -> session id
        self._parents: set[str] = set()
        self._cancelled: set[str] = set()  # tasks cancelled: nothing more is published

    def _role(self, context: RequestContext) -> str:
        named = _metadata(context).get("role")
        if isinstance(named, str) and named:
            return named
        roles = list(self.runtime.catalog.roles)
        if len(roles) == 1:
            return roles[0]
        raise RetinueError(f"name the role in the message's metadata.role: one of {roles}")

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        assert message is not None and context.task_id and context.context_id
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        ctx = self._client(context)
        try:
            role = self._role(context)
            instance = _instance(task.context_id)
            if _metadata(context).get("unload"):
                text = await self.runtime.manager.unload_subagent(ctx.agent_id, role, instance)
                await updater.complete(self._say(updater, text))
                return
            await updater.start_work()
            asked = await self._turn(ctx, context.get_user_input()[:MAX_MESSAGE], role,
                                     instance, updater, task.id)  # fmt: skip
        except RetinueError as exc:
            if task.id not in self._cancelled:
                await updater.failed(self._say(updater, str(exc)))
            return
        except Exception as exc:  # a bug of ours: the client gets one line, the log the rest
            log.exception("A2A task %s failed", task.id)
            await updater.failed(self._say(updater, f"internal error: {type(exc).__name__}"))
            return
        held, reply = asked
        if task.id in self._cancelled:  # its turn was interrupted: the task stays canceled
            return
        if held is not None:
            await updater.requires_input(self._say(updater, reply))
        else:
            await updater.complete(self._say(updater, reply))

    def _client(self, context: RequestContext) -> ToolContext:
        """The tool context of the calling token's parent."""
        user = context.call_context.user
        who = user.principal if isinstance(user, TokenUser) else None
        name = who.name if who is not None else None
        parent = self.parent_id if name is None else f"{self.parent_id}-{name}"
        self._parents.add(parent)
        base = client_context(self.runtime, parent)
        tenant = who.tenant if who is not None and who.tenant else base.tenant
        return replace(base, tenant=tenant)

    async def _turn(self, client: ToolContext, text: str, role: str, instance: str,
                    updater: TaskUpdater, task_id: str) -> tuple[str | None, str]:  # fmt: skip
        """One message to the context's session (or the answer to its question): the
        question it asks, or its reply."""
        if not text.strip():
            raise RetinueError("the message has no text")
        async with _reporting(updater, lambda: task_id in self._cancelled) as sink:
            ctx = replace(client, events=sink)
            key = SessionKey.of(ctx.agent_id, role, instance)
            self._running[task_id] = key.id
            try:
                reply = await self.runtime.manager.delegate(
                    ctx, task=text, role=role, interactive=True, instance=instance
                )
            finally:
                self._running.pop(task_id, None)
        held = self.runtime.manager.registry.get(key)
        question = held.session.question if held is not None else None
        if question is not None:
            return key.id, question
        return None, _without_note(reply)

    @staticmethod
    def _say(updater: TaskUpdater, text: str) -> Message:
        return updater.new_agent_message([Part(text=text)])

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        cid = self._running.get(context.task_id or "")
        self._cancelled.add(context.task_id or "")
        if cid is not None:
            self.runtime.manager.interrupt(cid)
        task = context.current_task
        if task is not None:
            await TaskUpdater(event_queue, task.id, task.context_id).cancel()

    async def close(self) -> None:
        """Unload and consolidate every session the A2A clients still hold."""
        for parent in sorted(self._parents | {self.parent_id}):
            await self.runtime.manager.cleanup(parent)


def _without_note(reply: str) -> str:
    """The sub-agent's reply without the note for a parent agent (``[interactive session …
    is waiting …]``): an A2A client continues by sending to the same context."""
    head, sep, _tail = reply.rpartition("\n\n[interactive session ")
    return head if sep else reply


@asynccontextmanager
async def _reporting(updater: TaskUpdater, stopped: Callable[[], bool]) -> AsyncIterator[Any]:
    """An event sink whose events become ``working`` status updates, in order, until the
    task is ``stopped`` (cancelled: its state stays canceled)."""
    queue: asyncio.Queue[Event | None] = asyncio.Queue()

    def sink(event: Event) -> None:
        if event.kind != TEXT_DELTA:
            queue.put_nowait(event)

    async def forward() -> None:
        while (event := await queue.get()) is not None:
            if stopped():
                continue
            data = json.dumps(event.to_dict(), default=str)[:MAX_EVENT]
            with suppress(Exception):  # a client that went away is not the run's failure
                message = updater.new_agent_message([Part(text=data)])
                await updater.update_status(TaskState.TASK_STATE_WORKING, message)

    forwarder = asyncio.create_task(forward())
    try:
        yield sink
    except BaseException:
        forwarder.cancel()
        raise
    finally:
        queue.put_nowait(None)
        with suppress(BaseException):
            await forwarder


def build_app(runtime: Runtime, url: str) -> tuple[Starlette, RoleExecutor]:
    """The A2A JSON-RPC app (card at the well-known path, RPC at ``/``) and its executor;
    when the app stops, the sessions its clients still hold are consolidated."""
    card = agent_card(runtime, url)
    executor = RoleExecutor(runtime)
    handler = DefaultRequestHandler(agent_executor=executor, task_store=InMemoryTaskStore(),
                                    agent_card=card)  # fmt: skip
    rpc = create_jsonrpc_routes(handler, "/", context_builder=TokenContextBuilder())
    routes = [*create_agent_card_routes(card), *rpc]

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:  # the server stops: the sessions still open are consolidated, in its loop
            await executor.close()
            await runtime.tools.close_sources()

    return Starlette(routes=routes, lifespan=lifespan), executor
