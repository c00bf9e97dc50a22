"""What a role becomes when it runs: its model, tools, system prompt, run config, and where
its memory goes when its conversation ends.

Besides the role's own prompt, a sub-agent's system prompt carries the project instructions
(``CLAUDE.md`` / ``AGENTS.md``, as Claude Code gives its sub-agents) and the bodies of the
skills its ``skills:`` preloads; those skills are *active* for its whole session, so their
``allowed-tools`` are pre-approved there (allow rules added to its policy: no approval is
asked for them, deny rules and modes still apply; they never take its other tools away),
and their ``disallowed-tools`` are removed from its tools, as in Claude Code and the Agent
Skills specification. ``skills``, ``skill_tool`` and ``instructions`` are
set by whoever assembles the process (:class:`retinue.runtime.Runtime`). A role with
``isolation: worktree`` works in a git worktree of the workspace
(:mod:`~retinue.subagents.worktree`), released when its session closes."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from retinue.engine.config import ContextKeeper, RunConfig
from retinue.engine.output import output_spec
from retinue.engine.session import Consolidation, Session
from retinue.errors import ConfigError
from retinue.events import CONSOLIDATED, NOTICE, EventSink, emit
from retinue.llm.a2a import remote_agent
from retinue.llm.base import Model
from retinue.llm.settings import with_settings
from retinue.memory.base import Memory
from retinue.memory.store import SharedMemoryStore
from retinue.messages import Message
from retinue.policy.gate import Policy
from retinue.policy.hooks import Hooks
from retinue.policy.modes import PermissionMode
from retinue.policy.rules import RuleSet
from retinue.store.transcripts import transcript_store
from retinue.subagents.roles import Role, RoleCatalog, with_initial_prompt
from retinue.subagents.tasklist import TASK_TOOL_NAMES, task_store, task_tools
from retinue.subagents.team import TEAM_TOOL_NAMES, team_tools
from retinue.subagents.tools import (
    ASK_TOOL_NAME,
    SEND_TOOL_NAME,
    SPAWN_TOOL_NAMES,
    ask_parent,
    roles_section,
    send_message,
    subagent_tools,
)
from retinue.subagents.worktree import Worktree, close_worktree, open_worktree
from retinue.tools.base import Tool, ToolContext, ToolRegistry
from retinue.tools.builtin.transcripts import TRANSCRIPT_TOOL_NAME, read_transcript

if TYPE_CHECKING:
    from retinue.skills.catalog import Skill, SkillCatalog

__all__ = ["AgentFactory"]

log = logging.getLogger("retinue.subagents")


class AgentFactory:
    """Builds runs for roles (see the module docstring)."""

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
        max_iterations: int = 50,
        stream: bool = False,
    ) -> None:
        self.catalog = catalog
        self.tools = tools
        self.default_model = default_model
        self.memory = memory
        self.max_iterations = max_iterations
        self.stream = stream
        self._model_for = model_for
        self._models: dict[str, Model] = {}
        self._memory_tools = tuple(memory_tools)
        self.keeps_transcripts = False  # ReadTranscript: set by the manager when it keeps them
        self._keeper_for = keeper_for
        self.skills: SkillCatalog | None = None  # for roles' ``skills:``
        self.skill_tool: Tool | None = None  # given to roles that preload skills
        self.instructions = ""  # the project instructions' prompt section
        self._missing: set[tuple[str, str]] = set()
        self._worktrees: dict[str, Worktree] = {}  # by agent id: isolation: worktree

    def config(self, role: Role, ctx: ToolContext, *, interactive: bool) -> RunConfig:
        """What configures a run of ``role`` as the agent ``ctx`` describes (its history is
        the session's own :class:`~retinue.engine.config.RunState`)."""
        # a role that names a remote A2A agent: that agent, in a context of this session's own
        if role.a2a is not None:
            model = remote_agent(role.name, role.a2a, role.source, ctx.workspace, ctx.data_dir)
        else:
            model = self.model(role, ctx.events)
        if role.isolation == "worktree":
            ctx = self._isolated(role, ctx)
        if role.shared_memory:  # its memory tools reach the shared blocks it declares
            ctx = replace(ctx, shared_memory=role.shared_memory)
        gate = ctx.gate
        if role.hooks and gate is None:  # its own hooks: a gate that runs them and no more
            gate = Policy(modes=("bypassPermissions",), hooks=Hooks(workspace=ctx.workspace))
        if isinstance(gate, Policy) and (role.permission_mode is not None or role.hooks):
            hooks = gate.hooks.for_role(role.hooks, role.source, workspace=ctx.workspace,
                                        data_dir=ctx.data_dir)  # fmt: skip
            mode = cast("PermissionMode | None", role.permission_mode)
            gate = gate.narrowed(mode, hooks)
            ctx = replace(ctx, gate=gate)
        preloaded = self.preloaded(role)
        approved = [t for s in preloaded for t in s.allowed_tools or ()]
        denied = [t for s in preloaded for t in s.disallowed_tools if "(" in t]  # patterns
        if (approved or denied) and isinstance(gate, Policy):
            ctx = replace(ctx, gate=_with_skill_rules(gate, approved, denied, ctx))
        return RunConfig(
            model=model,
            tools=self.tools_for(role, interactive=interactive),
            context=ctx,
            max_iterations=role.max_turns or self.max_iterations,
            interactive=interactive,
            stream=self.stream,
            context_keeper=self._keeper_for(model) if self._keeper_for else None,
            output=output_spec(role.output_type) if role.output_type is not None else None,
        )

    def model(self, role: Role, events: EventSink | None = None) -> Model:
        """The role's model, asked with the role's model settings; when it cannot be built
        here (its provider's credentials are not configured), the default model, and the user
        is told once per model."""
        model = self._role_model(role, events)
        return with_settings(model, role.model_settings, self._model_for)

    def _role_model(self, role: Role, events: EventSink | None) -> Model:
        if role.model is None or self._model_for is None:
            return self.default_model
        model = self._models.get(role.model)
        if model is None:
            try:
                model = self._model_for(role.model)
            except ConfigError as exc:
                model = self.default_model
                note = (
                    f"role {role.name!r} asks for {role.model}, which cannot be used here "
                    f"({exc}); it runs on {model.name} instead"
                )
                log.warning("%s", note)
                emit(events, NOTICE, role.name, text=note)
            self._models[role.model] = model
        return model

    def tools_for(self, role: Role, *, interactive: bool = False) -> ToolRegistry:
        """The role's tools; ``AskParent`` for interactive sessions, and for one-shot runs of
        roles with the ``ask_parent`` capability (or that list it in their tools)."""
        preloaded = self.preloaded(role)
        removed = {*role.disallowed, *(t for s in preloaded for t in s.disallowed_tools)}
        tools = self.tools.restricted(role.tools).without(removed)
        named = set(role.tools or ())
        spawn = role.can("spawn_agent") or bool(SPAWN_TOOL_NAMES & named)
        extra = list(subagent_tools()) if spawn else []
        if preloaded and self.skill_tool is not None:
            extra.append(self.skill_tool)
        if interactive or role.can("ask_parent") or ASK_TOOL_NAME in (role.tools or ()):
            extra.append(ask_parent)
        if interactive or SEND_TOOL_NAME in (role.tools or ()):  # messages to its team
            extra.append(send_message)
        if task_store(self.memory) is not None and (interactive or TASK_TOOL_NAMES & named):
            extra.extend(task_tools())  # the team's shared task list
        if TEAM_TOOL_NAMES & named:  # TeamCreate, TeamDelete: to roles that name them
            extra.extend(team_tools())
        if role.can("memory") and self.memory is not None:
            extra.extend(self._memory_tools)
        reads = role.can("transcripts") or TRANSCRIPT_TOOL_NAME in named  # its children's
        if reads and self.keeps_transcripts and transcript_store(self.memory) is not None:
            extra.append(read_transcript)
        for t in extra:
            if t.name not in removed:
                tools.register(t)
        return tools

    def _isolated(self, role: Role, ctx: ToolContext) -> ToolContext:
        """``ctx`` working in a new git worktree of its workspace (or as it is, told why)."""
        tree = open_worktree(ctx.workspace, ctx.data_dir, ctx.agent_id)
        if isinstance(tree, str):
            note = f"role {role.name!r} asks for a worktree, but {tree}; it works in place"
            log.warning("%s", note)
            emit(ctx.events, NOTICE, ctx.agent_id, text=note)
            return ctx
        self._worktrees[ctx.agent_id] = tree
        return replace(ctx, workspace=tree.path)

    def release(self, agent_id: str, events: EventSink | None) -> None:
        """A session ended: its worktree is removed, or kept and reported when it changed."""
        tree = self._worktrees.pop(agent_id, None)
        report = close_worktree(tree) if tree is not None else None
        if report:
            log.warning("%s: %s", agent_id, report)
            emit(events, NOTICE, agent_id, text=f"{agent_id}: {report}")

    @staticmethod
    def first_turn(role: Role, session: Session, task: str) -> str:
        """The message a session of ``role`` is sent: its ``initialPrompt`` first when this is
        the session's first turn (nothing sent or queued yet)."""
        if session.messages or session.turns or session.tasks():
            return task
        return with_initial_prompt(role.initial_prompt, task)

    async def system_prompt(self, role: Role, ctx: ToolContext, *, fork: bool = False) -> str:
        """Rendered once per conversation, so every later request shares its prefix. A fork
        (:mod:`~retinue.subagents.fork`) gets it in a message, without the project
        instructions, which the parent's prompt it inherits already carries."""
        parts = [role.prompt or f"You are the {role.name} sub-agent: {role.description}"]
        tree = self._worktrees.get(ctx.agent_id)
        where = f"{tree.path}, a git worktree of {tree.workspace}" if tree else ctx.workspace
        parts.append(f"Your workspace is {where}.")
        if self.instructions and not fork:
            parts.append(self.instructions)
        if preloaded := self.preloaded(role, ctx.events):
            parts.append("## Skills preloaded for this role\n\n" + "\n\n".join(
                s.preloaded() for s in preloaded
            ))  # fmt: skip
        if self.memory is not None:
            rendered = await self.memory.render(ctx.tenant, role.name, **_shared(role, self.memory))
            if rendered:
                parts.append(rendered)
        if role.can("spawn_agent") and self.catalog.roles:
            parts.append(roles_section(self.catalog, only=role.delegates))
        return "\n\n".join(parts)

    def preloaded(self, role: Role, events: EventSink | None = None) -> list[Skill]:
        """The skills ``role`` preloads; a name no skill answers to is told once."""
        if not role.skills or self.skills is None:
            return []
        found, missing = self.skills.preload(role.skills)
        for name in missing:
            if events is not None and (role.name, name) not in self._missing:
                self._missing.add((role.name, name))
                why = (
                    "which is not installed"
                    if self.skills.get(name) is None
                    else "which its author keeps for the user to invoke (not preloaded)"
                )
                note = f"role {role.name!r} preloads skill {name!r}, {why}"
                log.warning("%s", note)
                emit(events, NOTICE, role.name, text=note)
        return found

    async def consolidate(
        self, role: Role, config: RunConfig, messages: Sequence[Message]
    ) -> Consolidation:
        """Write what the conversation taught ``role`` to its memory; say how that went."""
        ctx = config.context
        if self.memory is None:
            return "none"
        error = None
        try:
            written = await self.memory.consolidate(
                tenant=ctx.tenant,
                role=role.name,
                session_id=ctx.agent_id,
                messages=list(messages),
                model=config.model,
                **_shared(role, self.memory),
            )
            if not written:
                error = "the memory model failed; the transcript is kept for `retinue memory retry`"
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            log.exception("consolidation of %s failed", ctx.agent_id)
        emit(
            ctx.events,
            CONSOLIDATED,
            ctx.agent_id,
            role=role.name,
            ok=error is None,
            error=error,
        )
        return "failed" if error else "done"


def _shared(role: Role, memory: Memory) -> dict[str, Any]:
    """``shared=`` for a role that declares shared blocks (a :class:`Memory` written before
    shared blocks still serves the others; a role that needs them there is a clear error)."""
    if not role.shared_memory:
        return {}
    if not isinstance(memory, SharedMemoryStore):
        raise ConfigError(
            f"role {role.name!r} declares shared memory blocks, but the memory store "
            f"({type(memory).__name__}) keeps none"
        )
    return {"shared": role.shared_memory}


def _with_skill_rules(
    gate: Policy, approved: Sequence[str], denied: Sequence[str], ctx: ToolContext
) -> Policy:
    """``gate`` with the preloaded skills' ``allowed-tools`` added as allow rules, and their
    ``disallowed-tools`` patterns (``Bash(rm:*)``) as deny rules (a rule that does not parse
    is logged and left out; the parent's rules are not changed)."""
    rules = RuleSet()
    rules.extend(gate.rules)
    rules.add("allow", approved, ctx.workspace, where="a preloaded skill's allowed-tools")
    rules.add("deny", denied, ctx.workspace, where="a preloaded skill's disallowed-tools")
    for problem in rules.problems[len(gate.rules.problems) :]:
        log.warning("%s: %s", ctx.agent_id, problem)
    return replace(gate, rules=rules)
