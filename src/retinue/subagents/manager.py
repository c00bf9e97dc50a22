"""The sub-agent manager: one-shot delegation, interactive sessions, unload and cleanup.

Ownership is a tree keyed by agent id. The main agent's id is chosen by its runner; an
interactive session's agent id is its conversation id (``parent/role[:instance]``), a one-shot
sub-agent's is ``parent/role#n``. Every session belongs to the agent that created it and ends
when that agent unloads it or when that agent's run (one-shot) or session (interactive) ends —
whichever comes first; :meth:`SubAgentManager.cleanup` does the latter.

Each interactive turn runs in its own asyncio task, so a turn can be interrupted (or an
unloaded session's turn cancelled) without cancelling the parent that waits for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import AsyncIterator, Callable, Sequence

from retinue._tasks import cancel_and_wait, wait_owned
from retinue.engine.config import ContextKeeper, RunConfig, RunOutput
from retinue.engine.loop import run
from retinue.errors import SubAgentError
from retinue.events import CONSOLIDATED, SESSION, emit
from retinue.llm.base import Model
from retinue.memory.base import Memory
from retinue.messages import AssistantMessage, Message, SystemMessage, UserMessage
from retinue.subagents.roles import Role, RoleCatalog
from retinue.subagents.session import Session, SessionInfo, conversation_id
from retinue.subagents.tools import SPAWN_TOOL_NAMES, subagent_tools
from retinue.tools.base import Tool, ToolContext, ToolRegistry

__all__ = ["SubAgentManager"]

log = logging.getLogger("retinue.subagents")

INTERRUPTED_NOTE = "[This turn was interrupted by the parent before it finished.]"


class SubAgentManager:
    """Runs sub-agents for parents; implements the ``Delegator`` the SubAgent tools call."""

    def __init__(
        self,
        catalog: RoleCatalog,
        tools: ToolRegistry,
        *,
        default_model: Model,
        model_for: Callable[[str], Model] | None = None,
        memory: Memory | None = None,
        memory_tools: Sequence[Tool] = (),
        keeper_for: Callable[[Model], ContextKeeper | None] | None = None,
        max_depth: int = 3,
        max_iterations: int = 50,
        session_token_budget: int | None = None,
        stream: bool = False,
    ) -> None:
        self.catalog = catalog
        self.tools = tools
        self.default_model = default_model
        self.memory = memory
        self.max_depth = max_depth
        self.max_iterations = max_iterations
        self.session_token_budget = session_token_budget
        self.stream = stream
        self._model_for = model_for
        self._models: dict[str, Model] = {}
        self._memory_tools = tuple(memory_tools)
        self._keeper_for = keeper_for
        self._sessions: dict[str, Session] = {}
        self._one_shot_ids = itertools.count(1)

    # -- the Delegator protocol (what the SubAgent / UnloadSubAgent tools call) ----------

    async def delegate(
        self,
        ctx: ToolContext,
        *,
        task: str,
        role: str,
        interactive: bool = False,
        instance: str | None = None,
        background: bool = False,
    ) -> str:
        if not interactive:
            if instance or background:
                raise SubAgentError("'instance' and 'background' need interactive=true")
            return (await self.run_subagent(ctx, task, role)).content
        cid = conversation_id(ctx.agent_id, role, instance)
        how = f"role={role!r}" + (f", instance={instance!r}" if instance else "")
        if background:
            self.start_background(ctx, task, role, instance)
            return (
                f"[interactive session {cid} is working on it in the background: collect its "
                f"reply with SubAgentStatus({how}) (wait=true blocks until it is done)]"
            )
        out = await self.interactive_subagent(ctx, task, role, instance)
        return (
            f"{out.content}\n\n[interactive session {cid} is waiting for your next message: "
            f"continue with SubAgent({how}, interactive=true, task=...), "
            f"end it with UnloadSubAgent({how})]"
        )

    async def poll(
        self, ctx: ToolContext, role: str, instance: str | None = None, *, wait: bool = False
    ) -> str:
        """State of a session, and the replies of background turns finished since last asked."""
        session = self._known(ctx.agent_id, role, instance)
        if wait and session.jobs:
            await asyncio.wait(set(session.jobs))
        replies, session.inbox = session.inbox, []
        pending = len(session.jobs)
        head = f"Session {session.id}: {session.state}, {session.turns} turn(s) done"
        if pending:
            head += f", {pending} background turn(s) still to finish"
        if not replies:
            return head + "; no new replies."
        numbered = "\n\n".join(f"[{i}] {r}" for i, r in enumerate(replies, 1))
        return f"{head}. New replies:\n\n{numbered}"

    async def unload(self, ctx: ToolContext, role: str, instance: str | None = None) -> str:
        return await self.unload_subagent(ctx.agent_id, role, instance)

    # -- one-shot ------------------------------------------------------------------------

    async def run_subagent(self, ctx: ToolContext, task: str, role_name: str) -> RunOutput:
        """Run ``role`` on ``task`` to completion in a fresh conversation, then consolidate."""
        role = self._admit(ctx, role_name)
        agent_id = f"{ctx.agent_id}/{role.name}#{next(self._one_shot_ids)}"
        config = self._config(role, ctx.child(agent_id=agent_id, role=role.name), False)
        config.messages.append(SystemMessage(await self._system_prompt(role, config.context)))
        config.messages.append(UserMessage(task))
        try:
            async with self.owner(agent_id):
                return await run(config)
        finally:
            await self._consolidate(role, config)

    # -- interactive ---------------------------------------------------------------------

    async def interactive_subagent(
        self, ctx: ToolContext, task: str, role_name: str, instance: str | None = None
    ) -> RunOutput:
        """Create the session ``parent/role[:instance]`` or continue it with ``task``."""
        return await self._send(self._open(ctx, role_name, instance), task)

    def start_background(
        self, ctx: ToolContext, task: str, role_name: str, instance: str | None = None
    ) -> str:
        """Like :meth:`interactive_subagent`, but the turn runs on while the parent goes on;
        its reply waits in the session's inbox for :meth:`poll`. Returns the session id."""
        session = self._open(ctx, role_name, instance)
        job = asyncio.create_task(self._send(session, task), name=f"background {session.id}")
        session.jobs.add(job)
        job.add_done_callback(lambda done: _collect(session, done))
        return session.id

    def _open(self, ctx: ToolContext, role_name: str, instance: str | None) -> Session:
        cid = conversation_id(ctx.agent_id, role_name, instance)
        session = self._sessions.get(cid)
        if session is None:
            role = self._admit(ctx, role_name)
            child = ctx.child(agent_id=cid, role=role.name)
            session = Session(cid, role, ctx.agent_id, instance, self._config(role, child, True))
            self._sessions[cid] = session
            emit(ctx.events, SESSION, cid, action="created", conversation_id=cid,
                 parent_id=ctx.agent_id, role=role.name)  # fmt: skip
        return session

    async def _send(self, session: Session, task: str) -> RunOutput:
        async with session.lock:
            if session.closed:
                raise SubAgentError(f"session {session.id} was unloaded before this message")
            self._check_budget(session)
            config = session.config
            if not session.started:
                prompt = await self._system_prompt(session.role, config.context)
                config.messages.append(SystemMessage(prompt))
                session.started = True
            config.messages.append(UserMessage(task))
            turn = asyncio.create_task(run(config), name=f"turn of {session.id}")
            session.task = turn
            await wait_owned(turn)
            if turn.cancelled():
                return self._interrupted(session)
            out = turn.result()
            session.turns += 1
            session.usage += out.usage
            session.last_reply = out.content
            emit(
                config.context.events,
                SESSION,
                session.id,
                action="paused",
                conversation_id=session.id,
                turns=session.turns,
            )
            return out

    def _check_budget(self, session: Session) -> None:
        budget, used = self.session_token_budget, session.usage.total_tokens
        if budget is not None and used >= budget:
            raise SubAgentError(
                f"session {session.id} has used {used} tokens, its budget is {budget}: "
                f"unload it (what it learned is kept in its memory) and start a new one"
            )

    def _interrupted(self, session: Session) -> RunOutput:
        messages = session.config.messages
        last = messages[-1]
        if not (isinstance(last, AssistantMessage) and not last.tool_calls):
            messages.append(AssistantMessage(INTERRUPTED_NOTE))
        state = "unloaded" if session.closed else "interrupted; the session is kept"
        return RunOutput(f"[turn of {session.id} {state}]", messages, "waiting_for_input")

    def interrupt(self, cid: str) -> bool:
        """Cancel the running turn of session ``cid``; the session stays. True if one ran."""
        session = self._sessions.get(cid)
        if session is None or session.task is None or session.task.done():
            return False
        session.task.cancel()
        emit(session.config.context.events, SESSION, cid, action="interrupted", conversation_id=cid)
        return True

    async def unload_subagent(self, parent_id: str, role: str, instance: str | None = None) -> str:
        """End one session: cancel its running turn, end its children, consolidate, confirm."""
        session = self._known(parent_id, role, instance)
        del self._sessions[session.id]
        await self._close(session)
        return (
            f"Session {session.id} ended after {session.turns} turn(s); "
            "what it learned was consolidated into its memory."
        )

    async def cleanup(self, parent_id: str) -> list[str]:
        """End every session ``parent_id`` still holds (its run or session ended)."""
        mine = [s for s in self._sessions.values() if s.parent_id == parent_id]
        for s in mine:
            self._sessions.pop(s.id, None)
        await asyncio.gather(*(self._close(s) for s in mine))
        return [s.id for s in mine]

    @contextlib.asynccontextmanager
    async def owner(self, agent_id: str) -> AsyncIterator[None]:
        """Scope of one parent run: every session it still holds ends when the block exits,
        whether normally, by an error, or by cancellation."""
        try:
            yield
        finally:
            await self.cleanup(agent_id)

    async def _close(self, session: Session) -> None:
        """Called exactly once per session, after it left the registry."""
        session.closed = True
        for job in list(session.jobs):
            await cancel_and_wait(job)
        if session.task is not None:
            await cancel_and_wait(session.task)
        await self.cleanup(session.id)
        if session.started:
            await self._consolidate(session.role, session.config)
        emit(
            session.config.context.events,
            SESSION,
            session.id,
            action="unloaded",
            conversation_id=session.id,
            turns=session.turns,
        )

    # -- inspection ----------------------------------------------------------------------

    def sessions(self, parent_id: str | None = None) -> list[SessionInfo]:
        """Live sessions (all, or those ``parent_id`` holds), oldest first."""
        return [
            s.info()
            for s in self._sessions.values()
            if parent_id is None or s.parent_id == parent_id
        ]

    def session(self, cid: str) -> SessionInfo | None:
        s = self._sessions.get(cid)
        return s.info() if s else None

    def history(self, cid: str) -> list[Message]:
        s = self._sessions.get(cid)
        if s is None:
            raise SubAgentError(f"no interactive session {cid!r}")
        return list(s.config.messages)

    # -- building blocks -----------------------------------------------------------------

    def _known(self, parent_id: str, role: str, instance: str | None) -> Session:
        cid = conversation_id(parent_id, role, instance)
        session = self._sessions.get(cid)
        if session is None:
            live = [s.id for s in self._sessions.values() if s.parent_id == parent_id]
            raise SubAgentError(
                f"no interactive session {cid!r}; "
                f"this agent's live sessions: {', '.join(live) or 'none'}"
            )
        return session

    def _admit(self, ctx: ToolContext, role_name: str) -> Role:
        """The role, if ``ctx`` may start it: known, within depth, not already in the chain."""
        role = self.catalog.get(role_name)
        if ctx.depth + 1 > self.max_depth:
            raise SubAgentError(
                f"cannot start {role_name!r}: nesting depth limit {self.max_depth} reached "
                f"(chain: {' -> '.join(ctx.call_chain) or ctx.role})"
            )
        if role_name == ctx.role or role_name in ctx.call_chain:
            raise SubAgentError(
                f"cannot start {role_name!r}: it is already in this call chain "
                f"({' -> '.join((*ctx.call_chain, role_name))})"
            )
        return role

    def _config(self, role: Role, ctx: ToolContext, interactive: bool) -> RunConfig:
        model = self._model(role)
        return RunConfig(
            model=model,
            messages=[],
            tools=self._tools_for(role),
            context=ctx,
            max_iterations=self.max_iterations,
            interactive=interactive,
            stream=self.stream,
            context_keeper=self._keeper_for(model) if self._keeper_for else None,
        )

    def _model(self, role: Role) -> Model:
        if role.model is None or self._model_for is None:
            return self.default_model
        model = self._models.get(role.model)
        if model is None:
            model = self._models[role.model] = self._model_for(role.model)
        return model

    def _tools_for(self, role: Role) -> ToolRegistry:
        tools = self.tools.restricted(role.tools)
        spawn = role.can("spawn_agent") or any(t in SPAWN_TOOL_NAMES for t in role.tools or ())
        extra = list(subagent_tools()) if spawn else []
        if role.can("memory") and self.memory is not None:
            extra.extend(self._memory_tools)
        for t in extra:
            tools.register(t)
        return tools

    async def _system_prompt(self, role: Role, ctx: ToolContext) -> str:
        """Rendered once per conversation, so every later request shares its prefix."""
        parts = [role.prompt or f"You are the {role.name} sub-agent: {role.description}"]
        parts.append(f"Your workspace is {ctx.workspace}.")
        if self.memory is not None:
            rendered = await self.memory.render(ctx.tenant, role.name)
            if rendered:
                parts.append(rendered)
        if role.can("spawn_agent") and self.catalog.roles:
            parts.append(roles_section(self.catalog))
        return "\n\n".join(parts)

    async def _consolidate(self, role: Role, config: RunConfig) -> None:
        ctx = config.context
        if self.memory is None:
            return
        ok, error = True, None
        try:
            await self.memory.consolidate(
                tenant=ctx.tenant,
                role=role.name,
                session_id=ctx.agent_id,
                messages=list(config.messages),
                model=config.model,
            )
        except Exception as exc:  # the memory layer keeps its own transcript for retry
            ok, error = False, f"{type(exc).__name__}: {exc}"
            log.exception("consolidation of %s failed", ctx.agent_id)
        emit(
            ctx.events,
            CONSOLIDATED,
            ctx.agent_id,
            role=role.name,
            session_id=ctx.agent_id,
            ok=ok,
            error=error,
        )


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


def _collect(session: Session, job: asyncio.Task[RunOutput]) -> None:
    """Keep a finished background turn's reply (or failure) for the parent's next poll."""
    session.jobs.discard(job)
    if job.cancelled():
        return
    exc = job.exception()
    session.inbox.append(f"Error: {exc}" if exc is not None else job.result().content)
