"""Assembly: one process's model, roles, tools, memory and sub-agent manager, and the main
agent's conversation on top of them. The CLI and the HTTP service both start here.

The main agent's "run" is the handling of one user message (as in the design): when it ends,
every interactive session it opened is consolidated and closed. ``keep_sessions=True`` keeps
them for the whole conversation instead (until ``reset`` / ``close``) — an explicit option,
never the default. ``consolidate_later=True`` (the chat) lets a turn end without waiting for
those closes: they run on in tasks the conversation owns (:meth:`Conversation.consolidating`
names them, :meth:`Conversation.settled` waits for them, ``close`` and ``reset`` finish them).
"""

from __future__ import annotations

import asyncio
import os
import weakref
from collections.abc import Callable, Collection, Coroutine, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from retinue._deprecated import warn_renamed
from retinue.config import Settings
from retinue.engine.compress import AutoCompressor, CompressionResult
from retinue.engine.config import RunConfig, RunOutput
from retinue.engine.context_edit import configured_edit
from retinue.engine.instructions import Instructions, load_instructions
from retinue.engine.output import OutputSpec
from retinue.engine.session import (
    INTERRUPTED_NOTE,
    Consolidation,
    Lifecycle,
    Session,
    repair_history,
)
from retinue.engine.small_model_prompt import (
    SMALL_MODEL_OMITS,
    small_model_main_prompt,
    with_named_files,
    with_role_choices,
)
from retinue.engine.transcripts import TranscriptKeeper
from retinue.events import EventSink
from retinue.llm._gguf import DEFAULT_MODEL, installed_default
from retinue.llm.base import Model
from retinue.llm.profiles import profile_for
from retinue.llm.resolve import resolve_model
from retinue.llm.settings import ModelSettings, settings_for, with_settings
from retinue.mcp.config import attach_servers, load_servers
from retinue.memory import MemoryBackend, open_store
from retinue.messages import Content, Message, SystemMessage, user_content
from retinue.policy.approvals import Approver
from retinue.policy.build import make_policy
from retinue.policy.gate import Policy
from retinue.policy.guards import Guard
from retinue.policy.hooks import load_hooks
from retinue.policy.modes import PermissionMode
from retinue.policy.settings import SettingSource
from retinue.policy.trust import TrustStore, settings_trust
from retinue.skills import SkillCatalog, skill_dirs, skill_tool, skills_section
from retinue.store.conversations import ConversationStore
from retinue.subagents import Role, RoleCatalog, SubAgentManager, role_dirs, roles_section
from retinue.subagents.caps import FanOutLimits
from retinue.subagents.tasklist import task_store, task_tools
from retinue.subagents.team import team_tools
from retinue.subagents.tools import ask_parent, send_message, subagent_tools
from retinue.telemetry.prices import set_prices
from retinue.telemetry.trace import setup as setup_tracing
from retinue.tools.base import Tool, ToolContext, ToolRegistry, merge
from retinue.tools.builtin import builtin_tools
from retinue.tools.builtin.memory import memory_tools
from retinue.tools.builtin.transcripts import read_transcript

__all__ = [
    "LOCAL_DEFAULT",
    "Conversation",
    "Runtime",
    "choose_model",
    "load_roles",
    "role_tools",
]

LOCAL_DEFAULT = f"local:{DEFAULT_MODEL}"
MAIN_PROMPT = (
    "You are Retinue, a capable software agent working in the workspace {workspace}. "
    "Use your tools to read, search and change files and to run commands there; prefer "
    "checking over guessing, and answer concisely with what you did and found."
)


def choose_model(settings: Settings) -> tuple[str, str | None]:
    """The main model's string, and a one-line notice when it was picked for the user."""
    if settings.model:
        return settings.model, None
    if os.environ.get("OPENAI_API_KEY"):
        # the current mid tier, as claude-sonnet-5-5 below (retinue.llm.profiles.CATALOGUE)
        return "openai:gpt-5.6-terra", "Using openai:gpt-5.6-terra (OPENAI_API_KEY is set)."
    # current models of each provider (the catalogue, retinue.llm.profiles, lists them)
    if os.environ.get("ANTHROPIC_API_KEY"):
        return (
            "anthropic:claude-sonnet-5-5",
            "Using anthropic:claude-sonnet-5-5 (ANTHROPIC_API_KEY is set).",
        )
    for var in ("GEMINI_API_KEY", "GOOGLE_API_KEY"):
        if os.environ.get(var):
            model = "gemini:gemini-3.1-pro-preview"
            return model, f"Using {model} ({var} is set)."
    local = f"local:{installed_default()}"
    return local, (
        f"No model configured and no API key set: using the embedded local model "
        f"{local} (set RETINUE_MODEL or --model to choose another). It manages "
        "small tasks only (listing or reading files; editing code and running commands "
        "usually fail, and a task takes tens of seconds): for real work use a hosted model, "
        "or Ollama or vLLM with OPENAI_BASE_URL=<server>/v1 --model openai:<name>."
    )


def load_roles(settings: Settings, tools: ToolRegistry | None = None) -> RoleCatalog:
    """Every role the settings' directories define, with unknown tool names reported."""
    catalog = RoleCatalog.load(role_dirs(settings.workspace, settings.home), settings.model_aliases)
    tools = tools or ToolRegistry(builtin_tools())
    servers = load_servers(settings.workspace, settings.mcp_servers, settings.config_file)
    catalog.check_tools([*tools.names, *(t.name for t in role_tools())], servers)
    return catalog


def role_tools() -> list[Tool]:
    """The tools a role may name besides the registry's: delegation, AskParent, messages,
    the task list, teams and memory (each given to the roles that name it)."""
    return [*subagent_tools(), ask_parent, send_message, *task_tools(), *team_tools(),
            *memory_tools(), read_transcript]  # fmt: skip


@dataclass(slots=True)
class Runtime:
    """The shared pieces of one process. Build it with :meth:`create`."""

    settings: Settings
    model: Model
    catalog: RoleCatalog
    tools: ToolRegistry
    manager: SubAgentManager
    memory: MemoryBackend | None
    compressor: AutoCompressor
    events: EventSink | None = None
    notice: str | None = None
    instructions: str | None = None  # the main agent's own system prompt (library ``Agent``)
    policy: Policy | None = None  # what may run (None: everything; see retinue.policy)
    problems: list[str] = field(default_factory=list)  # settings problems to report once
    bare: bool = False  # the main agent gets no AskParent, no memory tools, and the
    # delegation tools only when the catalog has roles (Agent(builtin_tools=False))
    skills: SkillCatalog = field(default_factory=SkillCatalog)  # Agent Skills (retinue.skills)
    project: Instructions = field(default_factory=Instructions)  # CLAUDE.md / AGENTS.md
    _conversations: weakref.WeakSet[Conversation] = field(
        init=False, repr=False, compare=False, default_factory=weakref.WeakSet
    )  # the live ones, told when the event sink changes

    def __setattr__(self, name: str, value: object) -> None:
        """``events`` replaced (the chat and the service put their own sink in once the
        runtime is built): each live conversation's session gets it now, for its next turn."""
        object.__setattr__(self, name, value)
        if name == "events":
            for conversation in getattr(self, "_conversations", ()):
                conversation.retarget()

    @classmethod
    def create(
        cls,
        settings: Settings,
        *,
        model: Model | None = None,
        model_for: Callable[[str], Model] = resolve_model,
        events: EventSink | None = None,
        extra_tools: list[Tool] | None = None,
        with_memory: bool = True,
        stream: bool = False,
        builtins: bool = True,
        roles: Sequence[Role] = (),
        instructions: str | None = None,
        permission_mode: str | None = None,
        default_mode: PermissionMode = "bypassPermissions",
        approver: Approver | None = None,
        model_settings: ModelSettings | None = None,
        guards: Sequence[Guard] = (),
        setting_sources: Collection[SettingSource] | None = None,
    ) -> Runtime:
        """``builtins=False`` leaves out the file and shell tools; ``roles`` are defined in
        code and win over role files of the same name; ``instructions`` replace the main
        agent's default system prompt. ``permission_mode`` (a flag's) wins over the
        settings' mode, and ``default_mode`` (the surface's) applies when neither says;
        ``approver`` answers the calls that ask (each conversation may have its own);
        ``model_settings`` apply to the main model (a role's own settings refine them).
        ``guards`` are the program's checks at every depth (:mod:`retinue.policy.guards`);
        ``setting_sources`` chooses the settings files whose rules, mode and hooks apply
        (:mod:`retinue.policy.settings`; ``None``: all of them)."""
        notice = None
        set_prices(settings.model_prices)  # [model_prices] over the defaults
        setup_tracing(settings.otel_endpoint, capture_content=settings.otel_capture_content)

        def configured(spec: str) -> Model:  # a model asked as config.toml says for it
            built = model_for(spec)
            table, aliases = settings.model_settings, settings.model_aliases
            found = settings_for(built.name, table, aliases)
            return with_settings(built, found, model_for)

        if model is None:
            spec, notice = choose_model(settings)
            model = configured(spec)
        model = with_settings(model, model_settings, model_for)
        web = {"web_search_url": settings.web_search_url,
               "web_fetch_allow_private": settings.web_fetch_allow_private}  # fmt: skip
        tools = ToolRegistry([*(builtin_tools(**web) if builtins else []), *(extra_tools or [])])
        catalog = load_roles(settings, tools)
        catalog.roles.update({role.name: role for role in roles})
        attach_servers(tools, settings, catalog.roles.values())  # MCP tools, started on use
        media = settings.media_max_bytes  # images and PDFs of stored conversations
        memory = (
            open_store(settings.home, settings.database_url, media_max_bytes=media)
            if with_memory
            else None
        )
        edit = configured_edit(settings.context_edit_trigger, settings.context_edit_keep)
        compressor = AutoCompressor(edit=edit)
        days = settings.transcript_retention_days  # 0: no transcript is kept
        keeper = TranscriptKeeper(memory.transcripts, days) if memory and days > 0 else None
        manager = SubAgentManager(
            catalog,
            tools,
            default_model=model,
            model_for=configured,
            memory=memory,
            memory_tools=memory_tools(),
            keeper_for=lambda _m: compressor,
            max_depth=settings.max_depth,
            limits=FanOutLimits(
                per_run=settings.max_subagents_per_run,
                per_conversation=settings.max_subagents_per_conversation,
                concurrent=settings.max_concurrent_subagents,
            ),
            max_iterations=settings.max_iterations,
            session_token_budget=settings.session_token_budget or None,
            stream=stream,
            transcripts=keeper,
        )
        outside = settings.sandbox.get("trusted_outside", ())  # the user's hooks on the host
        hooks = load_hooks(settings.workspace, settings.home, config=settings.hooks,
                           config_path=settings.config_file, trusted_outside=outside,
                           sources=setting_sources)  # fmt: skip
        policy, problems = make_policy(
            settings.workspace,
            mode=permission_mode,
            default_mode=default_mode,
            config_permissions=settings.permissions,
            config_mode=settings.permission_mode,
            config_path=settings.config_file,
            approver=approver,
            hooks=hooks,
            trusted=settings_trust(TrustStore(settings.home)),  # `retinue mcp approve`
            guards=guards,
            sources=setting_sources,
        )
        problems += hooks.report()  # skipped entries, project hooks not approved
        skills = SkillCatalog.load(skill_dirs(settings.workspace, settings.home))
        project = load_instructions(settings.workspace)
        problems += [f"skill skipped: {p}" for p in skills.errors()] + project.problems
        manager.factory.skills, manager.factory.instructions = skills, project.section()
        manager.factory.skill_tool = skill_tool(skills) if skills.skills else None
        return cls(
            settings, model, catalog, tools, manager, memory, compressor, events, notice,
            instructions, policy, problems,
            skills=skills, project=project,
        )  # fmt: skip

    def context(self, agent_id: str) -> ToolContext:
        """The tool context of a main agent ``agent_id`` (what its tools and the sub-agents
        it delegates to see)."""
        return ToolContext(
            agent_id,
            self.settings.workspace,
            self.settings.home,
            role="main",
            tenant=self.settings.tenant,
            call_chain=("main",),
            manager=self.manager,
            memory=self.memory,
            events=self.events,
            gate=self.policy,
        )

    @property
    def conversations(self) -> ConversationStore | None:
        """Where the service stores its chats: the memory store's, unless there is no memory
        or ``keep_conversations`` is off."""
        if self.memory is None or not self.settings.keep_conversations:
            return None
        return self.memory.conversations

    def conversation(
        self,
        agent_id: str = "main",
        *,
        keep_sessions: bool = False,
        stream: bool = False,
        consolidate_later: bool = False,
        approver: Approver | None = None,
        deps: Any = None,
        output: OutputSpec[Any] | None = None,
    ) -> Conversation:
        return Conversation(
            self, agent_id, keep_sessions=keep_sessions, stream=stream,
            consolidate_later=consolidate_later, approver=approver, deps=deps, output=output,
        )  # fmt: skip


class Conversation:
    """The main agent's conversation: ``send`` handles one user message.

    It is a :class:`~retinue.engine.session.Session` whose children (interactive sessions)
    end after every message, unless ``keep_sessions``. Its settings flow one way, to the
    session, when they change: ``stream``, ``keep_sessions`` and ``deps`` set here, and the
    runtime's event sink replaced (:meth:`retarget`), take effect from the session's next
    turn (``stream`` from its next model call). With ``consolidate_later`` a turn does not
    wait for the sessions it ends: each leaves the manager's registry at once (so the next
    message may open a session of the same role and instance) and closes, consolidating
    its memory, in a task this conversation owns.
    """

    __slots__ = (
        "__weakref__",
        "_deps",
        "_ending",
        "_keep_sessions",
        "_stream",
        "agent_id",
        "approver",
        "consolidate_later",
        "gate",
        "output",
        "runtime",
        "session",
    )

    def __init__(
        self,
        runtime: Runtime,
        agent_id: str = "main",
        keep_sessions: bool = False,
        stream: bool = False,
        consolidate_later: bool = False,
        approver: Approver | None = None,
        deps: Any = None,
        output: OutputSpec[Any] | None = None,
    ) -> None:
        self.runtime = runtime
        self.agent_id = agent_id
        self._keep_sessions = keep_sessions
        self._stream = stream
        self.consolidate_later = consolidate_later
        self.approver = approver  # answers this conversation's calls that ask
        self._deps = deps  # the caller's per-run context: every tool's ctx.deps (Agent.run)
        self.output = output  # the main agent's output type (Agent)
        self._ending: dict[asyncio.Task[Consolidation], str] = {}
        policy = runtime.policy
        if policy is not None and approver is not None:
            policy = policy.with_approver(approver)
        self.gate: Policy | None = policy
        self.session: Session = self._new_session()
        runtime._conversations.add(self)  # (told when the runtime's event sink changes)

    def __repr__(self) -> str:
        return f"Conversation(agent_id={self.agent_id!r}, state={self.session.state!r})"

    @property
    def stream(self) -> bool:
        """Whether the main agent's text streams (``text_delta`` events)."""
        return self._stream

    @stream.setter
    def stream(self, value: bool) -> None:
        self._stream = value
        self.session.config.stream = value

    @property
    def keep_sessions(self) -> bool:
        """Whether the sessions a turn opens stay open after it (else they end with it)."""
        return self._keep_sessions

    @keep_sessions.setter
    def keep_sessions(self, value: bool) -> None:
        self._keep_sessions = value
        session = self.session
        session.lifecycle = replace(session.lifecycle, children_per_turn=not value)

    @property
    def deps(self) -> Any:
        """The caller's per-run context: every tool's ``ctx.deps``."""
        return self._deps

    @deps.setter
    def deps(self, value: Any) -> None:
        self._deps = value
        self.retarget()

    def retarget(self) -> None:
        """Give the session the tool context as it is now (the runtime's event sink, this
        conversation's gate and deps): what the runtime calls when its sink is replaced."""
        self.session.config.context = self.context

    @property
    def messages(self) -> list[Message]:
        return self.session.messages

    @property
    def context(self) -> ToolContext:
        ctx = self.runtime.context(self.agent_id)
        if ctx.gate is self.gate and self.deps is None:
            return ctx
        return replace(ctx, gate=self.gate, deps=self.deps)

    def _new_session(self) -> Session:
        rt = self.runtime
        delegates, extras = not rt.bare or bool(rt.catalog.roles), not rt.bare
        memory = rt.memory is not None and not self.small_model_prompt and extras
        reads = extras and not self.small_model_prompt and rt.manager.transcripts is not None
        own = [
            *(subagent_tools() if delegates else ()),
            *((ask_parent, send_message) if extras else ()),  # asks: the user; messages
            *(task_tools() if extras and task_store(rt.memory) else ()),  # the team's tasks
            *(team_tools() if extras else ()),  # TeamCreate, TeamDelete: it leads teams
            *(memory_tools() if memory else ()),
            *((read_transcript,) if reads else ()),  # its sub-agents' kept transcripts
            *((skill,) if (skill := rt.manager.factory.skill_tool) and extras else ()),  # skills
        ]
        tools = merge(rt.tools, own)
        config = RunConfig(
            model=rt.model,
            tools=self._small_model_tools(tools) if self.small_model_prompt else tools,
            context=self.context,
            max_iterations=rt.settings.max_iterations,
            stream=self.stream,
            context_keeper=rt.compressor,
            output=self.output,
        )
        keeper = rt.manager.transcripts
        lifecycle = Lifecycle(system_prompt=self.system_prompt, end_children=self._end_children,
                              transcript=keeper.keep if keeper is not None else None,
                              children_per_turn=not self._keep_sessions)  # fmt: skip
        budget = rt.settings.max_budget_usd or None  # US dollars (--max-budget-usd)
        return Session(self.agent_id, config, lifecycle, budget_usd=budget)

    async def _end_children(self) -> None:
        """End the sessions this conversation holds: after a turn with ``consolidate_later``
        without waiting (see the class docstring); at close, waiting for every one of them,
        those still closing from earlier turns included."""
        registry = self.runtime.manager.registry
        if self.consolidate_later and self.session.state != "closing":
            for held in registry.held_by(self.agent_id):
                task = held.session.closing()  # begins now, before anything awaits
                registry.forget(held)
                self._ending[task] = held.id
                task.add_done_callback(self._ended)
            return
        await self.runtime.manager.cleanup(self.agent_id)
        await self.settled()

    def _ended(self, task: asyncio.Task[Consolidation]) -> None:
        self._ending.pop(task, None)

    def consolidating(self) -> list[str]:
        """The ids of the sessions still closing after their turn (``consolidate_later``)."""
        return list(self._ending.values())

    async def settled(self) -> None:
        """Wait until the sessions closing after earlier turns are closed. Cancelling the
        wait leaves them closing."""
        if self._ending:
            await asyncio.wait(list(self._ending))

    def _small_model_tools(self, tools: ToolRegistry) -> ToolRegistry:
        return with_role_choices(tools.without(SMALL_MODEL_OMITS), list(self.runtime.catalog.roles))

    @property
    def small_model_prompt(self) -> bool:
        """Whether the main model is small and gets the small-model prompt and tool set."""
        return profile_for(self.runtime.model.name).small_model_prompt

    @property
    def compact(self) -> bool:
        """Deprecated: :attr:`small_model_prompt`."""
        warn_renamed("Conversation.compact", "Conversation.small_model_prompt")
        return self.small_model_prompt

    async def system_prompt(self) -> str:
        rt = self.runtime
        workspace = rt.settings.workspace
        if self.small_model_prompt:
            roles = [(r.name, r.description) for r in rt.catalog.roles.values()]
            skills = [s.name for s in rt.skills.offered()]
            parts = [small_model_main_prompt(workspace, roles, skills)]
            if rt.instructions:
                parts.insert(0, rt.instructions)
        else:
            parts = [rt.instructions or MAIN_PROMPT.format(workspace=workspace)]
            if rt.catalog.roles:
                parts.append(roles_section(rt.catalog))
            if rt.skills.skills and not rt.bare:
                parts.append(skills_section(rt.skills))
        if rt.project.text and not rt.bare:  # CLAUDE.md / AGENTS.md (engine.instructions)
            parts.append(rt.project.section())
        small = self.small_model_prompt
        if rt.memory is not None and not small and not rt.bare:  # else no memory tools
            rendered = await rt.memory.render(rt.settings.tenant, "main")
            if rendered:
                parts.append(rendered)
        return "\n\n".join(parts)

    def send(
        self, content: Content, *, on_start: Callable[[], None] | None = None
    ) -> Coroutine[object, object, RunOutput]:
        """Handle one user message (text, or a list of text, images and PDFs), after those
        sent before it (``on_start`` is called when its turn begins). Cancelling it cancels
        the turn, keeps the conversation usable and propagates; a turn ended by :meth:`close`
        returns with ``stop_reason="interrupted"``. Bad media: ``MediaError`` (raised by the
        call itself), nothing sent. (A plain method that returns the session's coroutine: no
        frame of its own on a turn's path.)"""
        text, parts = user_content(content)
        if self.small_model_prompt:
            text = with_named_files(text, self.runtime.settings.workspace)
        return self.session.send(text, on_start=on_start, parts=parts)

    async def resume(self, *, on_start: Callable[[], None] | None = None) -> RunOutput:
        """Go on with a turn restored cut short (``restore(..., pending_calls=True)``): its
        last step's calls run, then the model carries on (:meth:`Session.resume`)."""
        return await self.session.resume(on_start=on_start)

    def restore(self, messages: Sequence[Message], *, pending_calls: bool = False) -> None:
        """Continue from a stored history (before the first turn): its next message is sent
        after ``messages``. A history cut off mid-turn (the process stopped) is closed as an
        interrupted turn would be, unless ``pending_calls``: then its last step's calls that
        have no result stay so, for :meth:`resume` to run. Its next turn sends the current
        system prompt (the instructions as they are now), not the one stored with it."""
        if self.session.messages or self.session.state != "idle":
            raise RuntimeError("restore() is for a conversation that has not begun")
        history = list(messages)
        if history and not isinstance(history[-1], SystemMessage) and not pending_calls:
            repair_history(history, INTERRUPTED_NOTE)
        self.session.restore_state(history)

    async def compress(self) -> CompressionResult | None:
        return await self.runtime.compressor.compress_now(
            self.messages, self.runtime.model, self.context
        )

    async def reset(self) -> list[str]:
        """Start over (``/new``): end this conversation's sessions and forget its messages."""
        ended = await self.close()
        self.session = self._new_session()
        return ended

    async def close(self) -> list[str]:
        """End the conversation: its running turn, then every session it holds."""
        held = [s.id for s in self.runtime.manager.sessions(self.agent_id)]
        await self.session.close()
        return held
