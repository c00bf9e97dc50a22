"""The sub-agent manager: one-shot delegation, interactive sessions, unload and cleanup.

Ownership is a tree keyed by agent id (:mod:`~retinue.subagents.registry`). The main agent's
id is chosen by its runner; an interactive session's agent id is its conversation id
(``parent/role[:instance]``), a one-shot sub-agent's is ``parent/role#n``. Every session
belongs to the agent that created it and ends when that agent unloads it or when that
agent's run (one-shot) or session (interactive) ends — whichever comes first.

Every sub-agent, one-shot ones included, runs as a :class:`~retinue.engine.session.Session`:
turns in arrival order, interrupts that stop a turn and nothing else, and a close that ends
children first, consolidates exactly once and finishes even when its caller is cancelled.
The manager adds the admission rules and the events; :class:`AgentFactory` builds the runs
and :mod:`~retinue.subagents.tools` holds what the model reads.

Two-way sessions: a sub-agent's ``AskParent`` pauses its turn and the parent's pending call
returns the question; the parent's next message to the session is the answer. A one-shot
sub-agent that asks is registered with its parent as if it were interactive (under its role,
or ``role:asked-n`` when that is taken), so the answer reaches it and the parent's unload or
cleanup ends it. ``SubAgent(..., steer=true)`` hands a working session a message for its
next step and acknowledges at once.

How many sessions a conversation may start and hold, and a task delegated again and again,
are :mod:`~retinue.subagents.caps`' (checked with the other admission rules).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from retinue.engine.config import ContextKeeper, RunConfig, RunOutput
from retinue.engine.session import ASKS_NOTE, Consolidation, Lifecycle, Session, current_session
from retinue.engine.transcripts import TranscriptKeeper
from retinue.errors import SubAgentError
from retinue.events import SESSION, emit
from retinue.llm._media import note, sees_media
from retinue.llm.a2a import end_remote
from retinue.llm.base import Model
from retinue.memory.base import Memory
from retinue.messages import MediaPart, Message, UserMessage
from retinue.subagents.caps import FanOut, FanOutLimits
from retinue.subagents.factory import AgentFactory
from retinue.subagents.fork import ForkSource, fork_source, start_fork
from retinue.subagents.messaging import messenger_of
from retinue.subagents.registry import Held, SessionInfo, SessionKey, SessionRegistry
from retinue.subagents.roles import Role, RoleCatalog
from retinue.subagents.tasklist import release_tasks
from retinue.subagents.tools import (
    background_note,
    found_roles,
    question_note,
    status_text,
    steering_ack,
    unknown_session,
    unload_confirmation,
    waiting_note,
)
from retinue.tools.base import Tool, ToolContext, ToolRegistry
from retinue.tools.builtin.todo import forget_todos

log = logging.getLogger("retinue.subagents")

__all__ = ["SubAgentManager"]


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
        transcripts: TranscriptKeeper | None = None,
        limits: FanOutLimits | None = None,
    ) -> None:
        self.factory = AgentFactory(
            catalog,
            tools,
            default_model=default_model,
            model_for=model_for,
            memory=memory,
            memory_tools=memory_tools,
            keeper_for=keeper_for,
            max_iterations=max_iterations,
            stream=stream,
        )
        self.registry = SessionRegistry()
        self.caps = FanOut(limits or FanOutLimits(), self.registry)  # (retinue.subagents.caps)
        self.catalog = catalog
        self.memory = memory
        self.max_depth = max_depth
        self.session_token_budget = session_token_budget
        self.transcripts = transcripts  # keeps each ended session's transcript (None: none)
        self.factory.keeps_transcripts = transcripts is not None
        self._one_shot_ids = itertools.count(1)
        self.letting_go: set[str] = set()  # trees let go of here (retinue.durable), by root

    def lets_go(self, agent_id: str) -> bool:
        """Whether ``agent_id``'s tree is being let go of in this process (durable sessions:
        its records stay for another): its sessions' closes end nothing and consolidate
        nothing."""
        return bool(self.letting_go) and any(
            agent_id == root or agent_id.startswith(root + "/") for root in self.letting_go
        )

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
        fork: bool = False,
        parts: tuple[MediaPart, ...] = (),
    ) -> str:
        if not task.strip():
            raise SubAgentError("the task is empty: say what the sub-agent should do")
        repeated = self.caps.repeated(ctx, role, instance, task, interactive)
        if repeated is not None:  # the same task to the same role, again: not run
            return repeated
        known = self.catalog.roles.get(role)
        source = fork_source(ctx, known) if fork else None  # (retinue.subagents.fork)
        self._takes_parts(ctx, role, instance if interactive else "", parts, source)
        if known is not None and known.background:  # its file says background: true
            interactive, background = True, True
        if not interactive:
            if instance or background:
                raise SubAgentError("'instance' and 'background' need interactive=true")
            out, held = await self._one_shot(ctx, task, role, source, parts)
            return self._reply(out, held) if held is not None else out.content
        if background and source is None:
            cid = self.start_background(ctx, task, role, instance, parts)
            return background_note(cid, role, instance)
        held = self._open(ctx, role, instance)
        if source is not None:
            task = await start_fork(self.factory, source, held.role, held.session, task)
            if background:
                held.session.start(task, parts)
                return background_note(held.id, role, instance)
        else:
            task = self.factory.first_turn(held.role, held.session, task)
        out = await held.session.send(task, parts=parts)  # (awaited: one coroutine less)
        return self._reply(self._sent(held.session, out), held)

    async def steer(
        self, ctx: ToolContext, *, task: str, role: str, instance: str | None = None
    ) -> str:
        """Give the working session (role, instance) ``task`` before its next step, and
        acknowledge at once; a session that is not working gets it as a usual message."""
        held = self.registry.get(SessionKey.of(ctx.agent_id, role, instance))
        asking = held is not None and held.session.state == "asking"
        if held is None or not self.steer_session(held.id, task):
            return await self.delegate(ctx, task=task, role=role, interactive=True,
                                       instance=instance)  # fmt: skip
        return steering_ack(held.id, role, held.key.instance, answered=asking)

    @staticmethod
    def _reply(out: RunOutput, held: Held) -> str:
        how = (held.id, held.role.name, held.key.instance)
        return question_note(out.content, *how) if out.asking else waiting_note(out.content, *how)

    async def poll(
        self, ctx: ToolContext, role: str, instance: str | None = None, *, wait: bool = False
    ) -> str:
        """State of a session, and the replies of background turns finished since last asked."""
        session = self._known(ctx.agent_id, role, instance).session
        if wait:
            await session.wait_background()
        replies = session.collect()
        state = session.state
        if session.question is not None and not any(session.question in r for r in replies):
            state += f" ({ASKS_NOTE.format(id=session.id, question=session.question)})"
        return status_text(session.id, state, session.turns, session.background, replies)

    def find_roles(self, ctx: ToolContext, query: str) -> str:
        parent = self.catalog.roles.get(ctx.role) if ctx.depth else None
        only = parent.delegates if parent is not None else None
        return found_roles(self.catalog.search(query, only=only), query)

    async def unload(self, ctx: ToolContext, role: str, instance: str | None = None) -> str:
        return await self.unload_subagent(ctx.agent_id, role, instance)

    # -- one-shot ------------------------------------------------------------------------

    async def run_subagent(
        self, ctx: ToolContext, task: str, role_name: str, parts: tuple[MediaPart, ...] = ()
    ) -> RunOutput:
        """Run ``role`` on ``task`` to completion in a fresh conversation, then consolidate.
        ``parts`` (images, PDFs) follow the task's text in its message.

        If it asks a question instead (``stop_reason="asking"``), it stays, held by ``ctx``'s
        agent like an interactive session, until answered or unloaded."""
        self._takes_parts(ctx, role_name, "", parts)
        return (await self._one_shot(ctx, task, role_name, None, parts))[0]

    async def _one_shot(
        self,
        ctx: ToolContext,
        task: str,
        role_name: str,
        source: ForkSource | None = None,
        parts: tuple[MediaPart, ...] = (),
    ) -> tuple[RunOutput, Held | None]:
        role = self._admit(ctx, role_name)
        agent_id = f"{ctx.agent_id}/{role.name}#{next(self._one_shot_ids)}"
        child = ctx.child(agent_id=agent_id, role=role.name)
        session = self._session(agent_id, role, child, interactive=False)
        asked = False
        try:
            if source is not None:  # a fork: the parent's conversation, then its message
                task = await start_fork(self.factory, source, role, session, task)
            out = await session.send(self.factory.first_turn(role, session, task), parts=parts)
            asked = out.asking
        finally:
            if not asked:
                await session.close()
        return out, self._adopt(ctx, role, session) if asked else None

    def _adopt(self, ctx: ToolContext, role: Role, session: Session) -> Held:
        """A one-shot session asked its parent: hold it like an interactive one from now on."""
        key = SessionKey.of(ctx.agent_id, role.name)
        if self.registry.get(key) is not None:  # the role's own session is taken
            key = SessionKey.of(ctx.agent_id, role.name, f"asked-{session.id.rpartition('#')[2]}")
        held, _ = self.registry.get_or_create(key, lambda: Held(key, role, session))
        session.config.interactive = True
        emit(ctx.events, SESSION, session.id, action="created",
             parent_id=ctx.agent_id, role=role.name)  # fmt: skip
        return held

    # -- interactive ---------------------------------------------------------------------

    async def interactive_subagent(
        self,
        ctx: ToolContext,
        task: str,
        role_name: str,
        instance: str | None = None,
        parts: tuple[MediaPart, ...] = (),
    ) -> RunOutput:
        """Create the session ``parent/role[:instance]`` or continue it with ``task`` (and
        ``parts``, images and PDFs after its text)."""
        held, text = self._next_turn(ctx, task, role_name, instance, parts)
        return self._sent(held.session, await held.session.send(text, parts=parts))

    def start_background(
        self,
        ctx: ToolContext,
        task: str,
        role_name: str,
        instance: str | None = None,
        parts: tuple[MediaPart, ...] = (),
    ) -> str:
        """Like :meth:`interactive_subagent`, but the turn runs on while the parent goes on;
        its reply waits in the session's inbox for :meth:`poll`. Returns the session id."""
        held, text = self._next_turn(ctx, task, role_name, instance, parts)
        held.session.start(text, parts)  # queued now
        return held.id

    def _next_turn(
        self,
        ctx: ToolContext,
        task: str,
        role_name: str,
        instance: str | None,
        parts: tuple[MediaPart, ...],
    ) -> tuple[Held, str]:
        """The session (role, instance) of ``ctx``'s agent, opened if need be, and the text
        of its next message (with the role's ``initialPrompt`` on its first)."""
        self._takes_parts(ctx, role_name, instance, parts)
        held = self._open(ctx, role_name, instance)
        return held, self.factory.first_turn(held.role, held.session, task)

    def _open(self, ctx: ToolContext, role_name: str, instance: str | None) -> Held:
        """Get or create the session ``ctx.agent_id`` holds for (role, instance)."""
        key = SessionKey.of(ctx.agent_id, role_name, instance)

        def create() -> Held:
            role = self._admit(ctx, role_name)
            cid = key.id  # one string for the session's id, its agent id and the registry's
            child = ctx.child(agent_id=cid, role=role.name)
            session = self._session(cid, role, child, interactive=True, key=key)
            return Held(key, role, session)

        held, created = self.registry.get_or_create(key, create)
        if created:
            emit(ctx.events, SESSION, held.id, action="created",
                 parent_id=ctx.agent_id, role=held.role.name)  # fmt: skip
        return held

    def _session(
        self,
        agent_id: str,
        role: Role,
        ctx: ToolContext,
        *,
        interactive: bool,
        key: SessionKey | None = None,
    ) -> Session:
        """A session of ``role`` whose close ends its children, then consolidates."""
        messenger_of(self.registry).saw(ctx.tenant, current_session())  # its parent's
        config = self.factory.config(role, ctx, interactive=interactive)
        hooks = _Hooks(self, agent_id, role, ctx, config, key is not None)
        lifecycle = Lifecycle(
            system_prompt=hooks.system_prompt,
            end_children=hooks.end_children,
            consolidate=hooks.consolidate,
            transcript=hooks.transcript,
            closed=hooks.closed,
        )
        budget = self.session_token_budget if interactive else None
        money = role.max_budget_usd  # the role's front matter (maxBudgetUsd)
        session = Session(agent_id, config, lifecycle, token_budget=budget, budget_usd=money)
        self.caps.opened(agent_id, ctx)  # open until its close (_Hooks.closed)
        parent = current_session()
        if parent is not None and parent.recorder is not None:  # durable: its tree records it
            kind = "interactive" if key is not None else "one-shot"
            instance = key.instance if key is not None else None
            session.set_recorder(
                parent.recorder.child(agent_id, kind=kind, role=role.name, instance=instance)
            )
        return session

    def revive(
        self,
        parent: ToolContext,
        role_name: str,
        instance: str | None,
        session_id: str,
        *,
        one_shot: bool = False,
    ) -> Session:
        """A session recorded in another process (:mod:`retinue.durable`), rebuilt empty
        under ``parent`` with its id, held as before (a one-shot one as if it had asked); its
        state is the caller's to restore. The admission rules apply as at its start."""
        if one_shot:
            role = self._admit(parent, role_name)
            number = session_id.rpartition("#")[2]
            if number.isdigit():  # new one-shot ids of this process go past it
                self._one_shot_ids = itertools.count(max(next(self._one_shot_ids), int(number) + 1))
            child = parent.child(agent_id=session_id, role=role.name)
            session = self._session(session_id, role, child, interactive=False)
            held = self._adopt(parent, role, session)
        else:
            held = self._open(parent, role_name, instance)
        if held.session.id != session_id:
            raise SubAgentError(f"recorded session {session_id!r} would be {held.session.id!r}")
        return held.session

    @staticmethod
    def _sent(session: Session, out: RunOutput) -> RunOutput:
        """After a send to an interactive session: say it paused (or was interrupted)."""
        if not out.asking:  # (AskParent itself tells who asks what)
            emit(session.config.context.events, SESSION, session.id,
                 action="interrupted" if out.stop_reason == "interrupted" else "paused",
                 turns=session.turns)  # fmt: skip
        return out

    def interrupt(self, cid: str) -> bool:
        """Cancel the running turn of session ``cid``; the session stays. True if one ran."""
        held = self.registry.by_id(cid)
        return held is not None and held.session.interrupt()

    def answer(self, cid: str, text: str) -> bool:
        """Answer the question session ``cid`` is asking, from outside its parent (a person,
        over the HTTP service); its turn goes on in the background and its reply waits for
        the parent's poll. False if it is not asking."""
        held = self.registry.by_id(cid)
        if held is None or held.session.state != "asking":
            return False
        held.session.start(text)
        emit(held.session.config.context.events, SESSION, cid, action="answered")
        return True

    def steer_session(self, cid: str, text: str) -> bool:
        """Steer session ``cid`` (see :meth:`Session.steer`; a person may, over the HTTP
        service): a pending question is answered instead. False if no turn of it runs."""
        held = self.registry.by_id(cid)
        if held is None:
            return False
        asking = held.session.state == "asking"
        if not held.session.steer(text):
            return False
        emit(held.session.config.context.events, SESSION, cid,
             action="answered" if asking else "steered")  # fmt: skip
        return True

    async def unload_subagent(self, parent_id: str, role: str, instance: str | None = None) -> str:
        """End one session: cancel its turns, end its children, consolidate, confirm."""
        held = self._known(parent_id, role, instance)
        outcome = await held.session.close()
        began = _began(held.session.messages)
        return unload_confirmation(held.id, held.session.turns, outcome, began=began)

    async def cleanup(self, parent_id: str) -> list[str]:
        """End every session ``parent_id`` still holds (its run or session ended)."""
        self.caps.run_ended(parent_id)  # a main agent's next run counts from nothing
        return await self.registry.cleanup(parent_id)

    @contextlib.asynccontextmanager
    async def owner(self, agent_id: str) -> AsyncIterator[None]:
        """Scope of one parent run: every session it still holds ends when the block exits,
        whether normally, by an error, or by cancellation."""
        try:
            yield
        finally:
            await self.cleanup(agent_id)

    # -- inspection ----------------------------------------------------------------------

    def sessions(self, parent_id: str | None = None) -> list[SessionInfo]:
        """Live sessions (all, or those ``parent_id`` holds), oldest first."""
        return [h.info() for h in self.registry.held_by(parent_id)]

    def session(self, cid: str) -> SessionInfo | None:
        held = self.registry.by_id(cid)
        return held.info() if held else None

    def history(self, cid: str) -> list[Message]:
        held = self.registry.by_id(cid)
        if held is None:
            raise SubAgentError(f"no interactive session {cid!r}")
        return list(held.session.messages)

    # -- admission -----------------------------------------------------------------------

    def _takes_parts(
        self,
        ctx: ToolContext,
        role_name: str,
        instance: str | None,
        parts: tuple[MediaPart, ...],
        source: ForkSource | None = None,
    ) -> None:
        """Refuse, before anything starts, ``parts`` for a sub-agent whose model reads no
        images or files (the line such a model would read in their place), or for a session
        waiting on its question (an answer is text). ``instance``: ``""`` for a one-shot
        run, else the interactive session it may continue."""
        if not parts:
            return
        held = None
        if instance != "":
            held = self.registry.get(SessionKey.of(ctx.agent_id, role_name, instance))
        if held is not None and held.session.state == "asking":
            raise SubAgentError(
                f"session {held.id} is waiting for the answer to its question: answer it "
                "without files first, then send them"
            )
        role = self.catalog.roles.get(role_name)
        if source is not None:  # a fork runs on its parent's model
            model = source.model
        elif held is not None:
            model = held.session.config.model
        elif role is not None and role.a2a is None:
            model = self.factory.model(role, ctx.events)
        else:  # unknown (refused by admission) or a remote agent (it says what it takes)
            return
        if not sees_media(model.name):
            raise SubAgentError(note(parts[0], model.name).strip("[]"))

    def _known(self, parent_id: str, role: str, instance: str | None) -> Held:
        key = SessionKey.of(parent_id, role, instance)
        held = self.registry.get(key)
        if held is None:
            live = [h.id for h in self.registry.held_by(parent_id)]
            raise SubAgentError(unknown_session(key.id, live))
        return held

    def _admit(self, ctx: ToolContext, role_name: str) -> Role:
        """The role, if ``ctx`` may start it (:meth:`check_start`), within the fan-out caps
        (and counted), and not in a tree being let go of here (durable sessions: it goes on
        elsewhere). A refusal is reported as the caps report theirs."""
        if self.lets_go(ctx.agent_id):
            raise SubAgentError(
                f"cannot start {role_name!r}: {ctx.agent_id}'s tree is stopping in this "
                "process (it goes on from its records elsewhere)"
            )
        if (deep := self._too_deep(ctx, role_name)) is not None:
            self.catalog.get(role_name)  # (an unknown role is said first)
            raise self.caps.refuse_depth(ctx, role_name, self.max_depth, deep)
        role = self.check_start(ctx, role_name)
        self.caps.admit(ctx, role_name)  # counted here: the fan-out caps
        return role

    def check_start(self, ctx: ToolContext, role_name: str) -> Role:
        """The role, if the delegation rules let ``ctx``'s agent start it: known, within
        ``max_depth``, among its own role's delegates, not already in its call chain; else
        :class:`SubAgentError` with the line the model reads. It counts and reports
        nothing: the one copy of the rules, for this manager and for the workers of
        :mod:`retinue.temporal`."""
        role = self.catalog.get(role_name)
        if (deep := self._too_deep(ctx, role_name)) is not None:
            raise SubAgentError(deep)
        parent = self.catalog.roles.get(ctx.role) if ctx.depth else None
        if parent is not None and not parent.may_delegate_to(role_name):
            raise SubAgentError(
                f"cannot start {role_name!r}: role {parent.name!r} may delegate only to "
                f"{', '.join(parent.delegates or ())}"
            )
        if role_name == ctx.role or role_name in ctx.call_chain:
            raise SubAgentError(
                f"cannot start {role_name!r}: it is already in this call chain "
                f"({' -> '.join((*ctx.call_chain, role_name))})"
            )
        return role

    def _too_deep(self, ctx: ToolContext, role_name: str) -> str | None:
        if ctx.depth + 1 <= self.max_depth:
            return None
        return (
            f"cannot start {role_name!r}: nesting depth limit {self.max_depth} reached "
            f"(chain: {' -> '.join(ctx.call_chain) or ctx.role})"
        )


class _Hooks:
    """A sub-agent session's :class:`Lifecycle` hooks, as bound methods of one small object:
    cheaper than a closure per hook when thousands of sessions sit idle."""

    __slots__ = ("agent_id", "config", "ctx", "keyed", "manager", "role")

    def __init__(
        self,
        manager: SubAgentManager,
        agent_id: str,
        role: Role,
        ctx: ToolContext,
        config: RunConfig,
        keyed: bool,
    ) -> None:
        self.manager, self.agent_id, self.role = manager, agent_id, role
        self.ctx, self.config, self.keyed = ctx, config, keyed

    def system_prompt(self) -> Awaitable[str]:
        return self.manager.factory.system_prompt(self.role, self.ctx)

    async def end_children(self) -> object:
        manager, agent_id = self.manager, self.agent_id
        ended = await manager.cleanup(agent_id)
        await end_remote(self.config.model)  # a remote A2A agent's context ends with it
        if not manager.lets_go(agent_id):  # its unfinished tasks go back to the list
            team = messenger_of(manager.registry).root_of(self.ctx.agent_id)
            try:
                await release_tasks(manager.memory, self.ctx.tenant, team, agent_id)
            except Exception:  # the store is down: they stay claimed; the close goes on
                log.warning("could not release the tasks of %s", agent_id, exc_info=True)
        return ended

    def consolidate(self, messages: Sequence[Message]) -> Awaitable[Consolidation]:
        if self.manager.lets_go(self.agent_id):  # another process goes on with it
            return _nothing()
        return self.manager.factory.consolidate(self.role, self.config, messages)

    async def transcript(self, session: Session) -> None:
        keeper = self.manager.transcripts
        if keeper is not None and not self.manager.lets_go(self.agent_id):  # (not ended)
            await keeper.keep(session)

    def closed(self, session: Session) -> None:
        registry, agent_id = self.manager.registry, self.agent_id
        self.manager.caps.closed(agent_id)
        held = registry.by_id(agent_id)
        if held is not None and held.session is session:
            registry.forget(held)
        if self.manager.lets_go(agent_id):  # not ended: its files stay, nothing is told
            return
        if held is None or held.session is session:  # (not a newer session of this id's)
            forget_todos(self.ctx.data_dir, agent_id)  # its TodoWrite list ends with it
        self.manager.factory.release(agent_id, self.ctx.events)  # isolation: worktree
        if self.keyed or held is not None:
            emit(self.ctx.events, SESSION, agent_id, action="unloaded",
                 turns=session.turns, consolidation=session.consolidation)  # fmt: skip


async def _nothing() -> Consolidation:
    return "none"


def _began(messages: Sequence[Message]) -> bool:
    """Whether a session's first turn began (its task reached the history)."""
    return any(isinstance(m, UserMessage) for m in messages)
