"""``Agent``: the library's front door, an agent in two lines.

    agent = retinue.Agent("openai:gpt-5.6-terra", instructions="Be brief.", tools=[add])
    print(agent.run_sync("What is 2 + 3?").content)

An agent is a :class:`~retinue.runtime.Runtime` (model, tools, roles, memory, sub-agent
manager) built on first use, plus one main-agent conversation per run. ``roles`` are
:class:`~retinue.subagents.roles.Role` objects defined in code; they sit beside the role
files found in the workspace and home (a code role wins over a file of the same name), and
the main agent delegates to them with its ``SubAgent`` tool. With ``builtin_tools=False`` the
model sees only the tools given, plus ``SubAgent`` & co. when ``roles`` are given (then the
only roles: role files are not read).

Each :meth:`Agent.run` is a fresh conversation (its interactive sub-agent sessions end with
it); :meth:`Agent.conversation` keeps one across messages. :meth:`Agent.stream` yields the
run's typed events as they happen (streamed text arrives as
:class:`~retinue.events.TextDelta` events, the sub-agents' too, each with the agent's path
in ``agent_id``) and holds the :class:`~retinue.engine.config.RunOutput` at the end.

Typed: ``Agent(output_type=Report)`` makes ``run()`` return a ``RunOutput[Report]`` whose
``output`` is the validated ``Report`` (:mod:`retinue.engine.output`); a role's own
``output_type`` reaches Python in :attr:`RunOutput.subagent_outputs`. ``run(..., deps=x)``
hands ``x`` to every tool at every depth as ``ctx.deps`` (``Agent[MyDeps, Report]`` with
``deps_type=MyDeps`` lets a type checker check it). :meth:`Agent.override` swaps the model
for a block, as tests do.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Generic, cast, overload

from typing_extensions import TypeVar

from retinue.config import Settings
from retinue.engine.config import RunOutput
from retinue.engine.output import OutputSpec, SubAgentOutput, output_spec
from retinue.errors import ConfigError, ConversationError, RoleError
from retinue.events import Event, EventSink, RunFinished, TextDelta
from retinue.llm.base import Model
from retinue.llm.resolve import resolve_model
from retinue.llm.settings import ModelSettings, with_settings
from retinue.memory import MemoryBackend, open_store
from retinue.messages import Content
from retinue.policy.approvals import Approver
from retinue.policy.guards import Guard
from retinue.policy.modes import PermissionMode
from retinue.policy.settings import SettingSource
from retinue.policy.settings import setting_sources as checked_sources
from retinue.runtime import Conversation, Runtime, choose_model, role_tools
from retinue.saved import SavedConversation, parse_export
from retinue.store.conversations import ConversationStore
from retinue.subagents.roles import Role, valid_name
from retinue.subagents.tools import NO_ANSWER
from retinue.tools.base import Tool, tool

__all__ = ["Agent", "AgentStream", "DepsT", "OutputT"]

DepsT = TypeVar("DepsT", default=Any)
"""The type of the per-run context (``run(..., deps=x)``, every tool's ``ctx.deps``)."""
OutputT = TypeVar("OutputT", default=Any)
"""The type of :attr:`RunOutput.output`: the ``output_type`` given."""


class Agent(Generic[DepsT, OutputT]):
    """A main agent: a model, instructions, tools and the roles it may delegate to.

    ``model`` is a string such as ``openai:gpt-5.6-terra`` or a :class:`~retinue.llm.Model`
    (e.g. :class:`~retinue.testing.ScriptedModel`); ``None`` picks one as ``retinue run``
    does. ``tools`` are :class:`Tool` objects or plain typed functions (wrapped with
    :func:`~retinue.tools.tool`). ``memory`` turns long-term memory (SQLite under ``home``,
    default ``RETINUE_HOME`` or ``~/.retinue``) on or off. ``workspace`` (default: the
    current directory) is where file and shell tools work and where ``.retinue/agents/``
    role files are looked for.

    ``builtin_tools=False`` means the model sees only ``tools``: no file, shell or web
    tools, no ``AskParent`` and no memory tools. Delegation is there only when asked for:
    with ``roles``, the main agent also gets ``SubAgent``, ``UnloadSubAgent``,
    ``SubAgentStatus`` and ``FindRole``, and those roles are the only ones (role files are
    not read); a role's own memory still works when it has the ``memory`` capability.

    ``max_iterations`` (default: the settings', 50) bounds the model calls of one run, and
    of each sub-agent's. A run that reaches it returns, it does not raise: its ``content``
    says it stopped and ``stop_reason`` is ``"max_iterations"`` (``"final"`` for an answer),
    so check :attr:`RunOutput.stop_reason`; a run that repeats the same call after being told
    stops sooner, with ``"repeated_call"`` (:attr:`RunOutput.stopped` covers both).
    ``max_budget_usd`` caps what the main agent's session may spend in US dollars (checked
    before each turn, as a token budget is; see :mod:`retinue.telemetry.prices`).
    ``model_settings`` (:class:`~retinue.llm.settings.ModelSettings`: effort, output tokens,
    ...) apply to the main model; a role's ``model_settings`` apply to its own.

    ``output_type`` (a pydantic model, a dataclass, a TypedDict or a JSON schema ``dict``)
    makes every answer typed: ``run()``'s :attr:`RunOutput.output` is the validated object
    and ``content`` its JSON. The model answers through a ``final_result`` tool; an answer
    that does not validate is shown its errors and retried ``output_retries`` times, then
    :class:`~retinue.errors.OutputValidationError`. A type that cannot be a schema is a
    :class:`~retinue.errors.ConfigError` here. ``deps_type`` only tells a type checker what
    ``run(..., deps=...)`` takes.

    Permissions: with ``approver`` (a function, sync or async, given a
    :class:`~retinue.policy.approvals.ApprovalRequest`, answering ``True`` / ``False`` or an
    :class:`~retinue.policy.approvals.Approval`) the agent runs in ``default`` mode and every
    call that needs a yes, at any depth, is put to it. Without one, the program embedding
    the agent is taken to have chosen its tools: calls run unasked (``bypassPermissions``),
    except what the settings' deny and ask rules or ``permission_mode`` say (a call that
    would ask with nobody to answer is refused, and the model is told how to allow it).
    ``guards`` (:class:`~retinue.policy.guards.Guard`) are the program's own checks before
    each model call, before and after each tool call and on each answer, at every depth,
    before the settings' hooks; a tool declared ``@tool(needs_approval=True)`` asks the
    approver in every mode. ``setting_sources`` chooses which settings files' rules, mode and
    hooks apply: any of ``"user"`` (``~/.claude/settings.json`` and ``config.toml``),
    ``"project"`` (``.claude/settings.json``) and ``"local"`` (``.claude/settings.local.json``);
    ``None`` (the default) all of them, ``[]`` none.

    ``store`` keeps the conversations asked for by id (``agent.conversation("abc")``):
    by default the memory store (SQLite in the data directory, or the settings'
    ``database_url``), else a PostgreSQL URL or a
    :class:`~retinue.store.conversations.ConversationStore`.
    """

    def __init__(
        self,
        model: str | Model | None = None,
        *,
        instructions: str | None = None,
        tools: Sequence[Tool | Callable[..., Any]] = (),
        roles: Sequence[Role] = (),
        memory: bool = True,
        builtin_tools: bool = True,
        workspace: str | Path | None = None,
        home: str | Path | None = None,
        on_event: EventSink | None = None,
        permission_mode: PermissionMode | None = None,
        approver: Approver | None = None,
        guards: Sequence[Guard] = (),
        setting_sources: Sequence[SettingSource] | None = None,
        max_iterations: int | None = None,
        max_budget_usd: float | None = None,
        model_settings: ModelSettings | None = None,
        output_type: type[OutputT] | Mapping[str, Any] | None = None,
        output_retries: int = 2,
        deps_type: type[DepsT] | None = None,
        store: ConversationStore | str | None = None,
    ) -> None:
        if max_iterations is not None and max_iterations < 1:
            raise ConfigError(f"max_iterations must be at least 1, not {max_iterations}")
        if output_retries < 0:
            raise ConfigError(f"output_retries must be 0 or more, not {output_retries}")
        self.output_type = output_type
        self._output: OutputSpec[Any] | None = None
        if output_type is not None:
            self._output = output_spec(dict(output_type) if isinstance(output_type, Mapping)
                                       else output_type, retries=output_retries)  # fmt: skip
        self.deps_type = deps_type
        self.model = model
        self._overrides: list[str | Model] = []  # override(model=...), innermost last
        self._built_with: str | Model | None = None  # the model the runtime runs on
        self.model_settings = model_settings
        self.max_iterations = max_iterations
        self.max_budget_usd = max_budget_usd
        self.permission_mode = permission_mode
        self.approver = approver
        self.guards = list(guards)
        self.setting_sources = checked_sources(setting_sources)  # unknown: ConfigError now
        self.instructions = instructions
        self.tools = [t if isinstance(t, Tool) else tool(t) for t in tools]
        self.roles = list(roles)
        self.memory = memory
        self.builtin_tools = builtin_tools
        self.workspace = Path(workspace) if workspace is not None else None
        self.home = Path(home) if home is not None else None
        self.on_event = on_event
        self._runtime: Runtime | None = None
        self._runner: asyncio.Runner | None = None
        self._active: dict[str, EventSink | None] = {}  # running conversations' listeners
        self._typed: dict[str, list[SubAgentOutput]] = {}  # sub-agents' typed answers, by run
        if isinstance(store, str) and not store.startswith(("postgres://", "postgresql://")):
            raise ConfigError(f"store: a PostgreSQL URL (postgresql://...), not {store[:40]!r}")
        self.store = store
        self._own_store: MemoryBackend | None = None  # opened for saved conversations

    @property
    def effective_model(self) -> str | Model | None:
        """The model the next run uses: the innermost :meth:`override`, else :attr:`model`."""
        return self._overrides[-1] if self._overrides else self.model

    @contextmanager
    def override(self, *, model: str | Model) -> Iterator[None]:
        """Run on ``model`` inside the ``with`` block (a test's
        :class:`~retinue.testing.ScriptedModel`), whether or not the agent has run before;
        the main agent and the sub-agents that inherit its model use it."""
        self._overrides.append(model)
        try:
            yield
        finally:
            self._overrides.remove(model)

    @property
    def runtime(self) -> Runtime:
        """The runtime under this agent, built on first use (model, roles, memory); it runs
        on :attr:`effective_model` (a model changed since is swapped in) and with the
        current :attr:`instructions` (a conversation begun or resumed after a change gets
        them)."""
        if self._runtime is not None and self.effective_model != self._built_with:
            self._swap_model(self._runtime)
        if self._runtime is not None:
            self._runtime.instructions = self.instructions
        if self._runtime is None:
            chosen = self.effective_model
            spec = chosen if isinstance(chosen, str) else None
            settings = Settings.load(home=self.home, workspace=self.workspace, model=spec)
            if self.max_iterations is not None:
                settings.max_iterations = self.max_iterations
            if self.max_budget_usd is not None:
                settings.max_budget_usd = self.max_budget_usd
            self._built_with = chosen
            self._runtime = Runtime.create(
                settings,
                model=chosen if isinstance(chosen, Model) else None,
                events=self._dispatch,
                extra_tools=self.tools,
                with_memory=self.memory,
                builtins=self.builtin_tools,
                roles=self.roles,
                instructions=self.instructions,
                permission_mode=self.permission_mode,
                default_mode="default" if self.approver is not None else "bypassPermissions",
                approver=self.approver,
                model_settings=self.model_settings,
                guards=self.guards,
                setting_sources=self.setting_sources,
            )
            if not self.builtin_tools:  # only what the caller gave: its tools, its roles
                self._runtime.bare = True
                roles = self._runtime.catalog.roles
                roles.clear()
                roles.update({role.name: role for role in self.roles})
            self._check_roles(self._runtime)
        return self._runtime

    def _swap_model(self, runtime: Runtime) -> None:
        """Put :attr:`effective_model` under the main agent and the roles that inherit."""
        chosen = self.effective_model
        if chosen is None:
            spec, _ = choose_model(runtime.settings)
            model = resolve_model(spec)
        else:
            model = resolve_model(chosen) if isinstance(chosen, str) else chosen
        model = with_settings(model, self.model_settings, resolve_model)
        runtime.model = model
        runtime.manager.factory.default_model = model
        self._built_with = chosen

    def _check_roles(self, runtime: Runtime) -> None:
        known = {*runtime.tools.names, *(t.name for t in role_tools())}
        for role in self.roles:
            if not valid_name(role.name):
                raise RoleError(f"role name {role.name!r}: use letters, digits, _ . - (max 64)")
            # mcp__<server>__<tool> names are listed when the server starts: not checked here
            unknown = [t for t in role.tools or () if t not in known and not t.startswith("mcp__")]
            if unknown:
                raise RoleError(f"role {role.name!r} names unknown tools: {', '.join(unknown)}")
            if role.output_type is not None:
                try:
                    output_spec(role.output_type)
                except ConfigError as exc:
                    raise RoleError(f"role {role.name!r}: {exc}") from None

    @overload
    def conversation(
        self, id: None = None, *, keep_sessions: bool = False, deps: DepsT | None = None
    ) -> Conversation: ...
    @overload
    def conversation(
        self,
        id: str,
        *,
        create: bool = True,
        keep_sessions: bool = False,
        deps: DepsT | None = None,
    ) -> SavedConversation: ...
    def conversation(
        self,
        id: str | None = None,
        *,
        create: bool = True,
        keep_sessions: bool = False,
        deps: DepsT | None = None,
    ) -> Conversation | SavedConversation:
        """A conversation that keeps its history across ``send`` calls: in this process,
        or, given an ``id``, saved in :attr:`store` after every turn and resumed by any
        process that asks for the same id (:class:`~retinue.saved.SavedConversation`), with
        the instructions as they are then and its pending approvals. With ``create=False``
        an id never saved is a :class:`~retinue.errors.ConversationError` at first use."""
        runtime = self.runtime
        if id is None:
            return runtime.conversation(keep_sessions=keep_sessions, deps=deps, output=self._output)

        def new(approver: Approver | None) -> Conversation:
            return runtime.conversation(f"conv-{id}", keep_sessions=keep_sessions, deps=deps,
                                        output=self._output, approver=approver)  # fmt: skip

        journal = None
        if runtime.settings.durable_sessions:  # the whole tree recorded (retinue.durable)
            journal = (runtime.memory or self._opened()).journal
        store = self._conversation_store()
        return SavedConversation(id, new, store, approver=self.approver, journal=journal,
                                 create=create)  # fmt: skip

    async def import_conversation(
        self, data: str | bytes | Mapping[str, Any], *, id: str | None = None,
        replace: bool = False,
    ) -> SavedConversation:  # fmt: skip
        """Store a conversation's JSON export (:meth:`SavedConversation.export`) under its
        own id, or ``id``; return it. A corrupt or foreign export, or an id already saved
        (unless ``replace``), is a :class:`~retinue.errors.ConversationError`, nothing
        stored."""
        export = parse_export(data)
        cid = id or export.id
        saved = self.conversation(cid)  # (checks the id)
        tenant = saved.tenant
        if not replace and await saved.store.load(tenant, cid) is not None:
            raise ConversationError(f"conversation {cid!r} is saved already (replace=True?)")
        await saved.store.save(tenant, cid, export.messages, approvals=export.approvals)
        return saved

    def _conversation_store(self) -> ConversationStore:
        """:attr:`store`: a store given, a PostgreSQL URL's, else the memory store's (SQLite
        in the data directory, or the settings' ``database_url``)."""
        if self.store is not None and not isinstance(self.store, str):
            return self.store
        memory = self.runtime.memory if self.store is None else None
        return (memory or self._opened()).conversations

    def _opened(self) -> MemoryBackend:
        if self._own_store is None:
            settings = self.runtime.settings
            url = self.store if isinstance(self.store, str) else settings.database_url
            self._own_store = open_store(settings.home, url)
        return self._own_store

    async def run(self, prompt: Content, *, deps: DepsT | None = None) -> RunOutput[OutputT]:
        """Run the agent on ``prompt`` (text, or a list of text, images and PDFs: parts,
        bytes or paths) in a fresh conversation; return its output. ``deps``
        reaches every tool, at every depth, as ``ctx.deps`` (never recorded, never sent)."""
        runtime = self.runtime
        agent_id = self._claim(None)
        try:
            conversation = runtime.conversation(agent_id, deps=deps, output=self._output)
            return self._typed_output(agent_id, await _unasked(conversation, prompt))
        finally:
            self._release(agent_id)

    def run_sync(self, prompt: Content, *, deps: DepsT | None = None) -> RunOutput[OutputT]:
        """:meth:`run` for code without an event loop (one loop is kept across calls)."""
        if self._runner is None:
            self._runner = asyncio.Runner()
        return self._runner.run(self.run(prompt, deps=deps))

    def stream(self, prompt: Content, *, deps: DepsT | None = None) -> AgentStream[OutputT]:
        """``async for event in agent.stream(prompt)``; then ``.output`` holds the result."""
        return AgentStream(self, prompt, deps)

    def close(self) -> None:
        """Release the memory store and the loop :meth:`run_sync` kept."""
        if self._runner is not None:
            self._runner.close()
            self._runner = None
        if self._runtime is not None and self._runtime.memory is not None:
            self._runtime.memory.close()
        if self._own_store is not None:
            self._own_store.close()
            self._own_store = None
        self._runtime = None  # a later run builds a new one

    def __enter__(self) -> Agent[DepsT, OutputT]:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _claim(self, listener: EventSink | None) -> str:
        """An agent id for a new run: ``main``, or ``main-2``... while others run, so that
        concurrent runs keep their sub-agent sessions and events apart."""
        n = 1
        while (agent_id := "main" if n == 1 else f"main-{n}") in self._active:
            n += 1
        self._active[agent_id] = listener
        self._typed[agent_id] = []
        return agent_id

    def _release(self, agent_id: str) -> None:
        del self._active[agent_id]
        self._typed.pop(agent_id, None)

    def _typed_output(self, agent_id: str, out: RunOutput[Any]) -> RunOutput[OutputT]:
        out.subagent_outputs = list(self._typed.get(agent_id, ()))
        return cast("RunOutput[OutputT]", out)

    def _dispatch(self, event: Event) -> None:
        root, _, below = event.agent_id.partition("/")
        listener = self._active.get(root)
        if below and listener is None and root in self._active and isinstance(event, TextDelta):
            return  # a sub-agent of a run that does not stream (it streams for another's sake)
        if self.on_event is not None:
            self.on_event(event)
        if below and isinstance(event, RunFinished) and "output" in event.data:
            self._keep_typed(root, event)
        if listener is not None:
            listener(event)

    def _keep_typed(self, root: str, event: RunFinished) -> None:
        """A sub-agent's typed answer, as its role's output type (the event has its JSON)."""
        kept = self._typed.get(root)
        runtime = self._runtime
        role = runtime.catalog.roles.get(str(event.role)) if runtime else None
        if kept is None or role is None or role.output_type is None:
            return
        value = output_spec(role.output_type).parse(json.dumps(event.output))
        kept.append(SubAgentOutput(event.agent_id, role.name, value))


async def _unasked(conversation: Conversation, prompt: Content) -> RunOutput:
    """One turn of a conversation nobody keeps: a question of the agent is answered with
    :data:`NO_ANSWER` (:meth:`Agent.conversation` lets the caller answer instead)."""
    out = await conversation.send(prompt)
    while out.asking:
        out = await conversation.send(NO_ANSWER)
    return out


class AgentStream(Generic[OutputT]):
    """The events of one run, as an async iterator; :attr:`output` once it is exhausted.

    Every event is typed (:data:`~retinue.events.AgentEvent`): ``match event: case
    TextDelta(text=t, agent_id=who)``. Text streams from the main agent and from every
    sub-agent, at every depth; ``agent_id`` says whose it is (``main``,
    ``main/researcher``, ``main/researcher/critic#1``).

    Leaving the ``async for`` early cancels the run once the iterator is closed (wrap it in
    :func:`contextlib.aclosing` to close it at once).
    """

    def __init__(self, agent: Agent[Any, OutputT], prompt: Content, deps: Any = None) -> None:
        self._agent = agent
        self._prompt = prompt
        self._deps = deps
        self.output: RunOutput[OutputT] | None = None

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._events()

    async def _events(self) -> AsyncIterator[Event]:
        agent = self._agent
        queue: asyncio.Queue[Event | None] = asyncio.Queue()
        runtime = agent.runtime
        agent_id = agent._claim(queue.put_nowait)
        factory = runtime.manager.factory
        factory.stream = True  # sub-agents stream too while a streaming run is on
        conversation = runtime.conversation(
            agent_id, stream=True, deps=self._deps, output=agent._output
        )
        task = asyncio.create_task(_unasked(conversation, self._prompt))
        task.add_done_callback(lambda _: queue.put_nowait(None))
        try:
            while (event := await queue.get()) is not None:
                yield event
            self.output = agent._typed_output(agent_id, task.result())
        finally:
            if not task.done():
                task.cancel()
                with suppress(asyncio.CancelledError):
                    await task
            agent._release(agent_id)
            factory.stream = any(sink is not None for sink in agent._active.values())
