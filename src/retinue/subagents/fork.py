"""Fork: a sub-agent that starts from its parent's conversation (``SubAgent(..., fork=true)``).

A fork's first request repeats the parent's last request byte for byte, so a provider's prompt
cache (which keys on the tool list, the system prompt and the messages, in that order) is
reused; what the fork's role adds comes after it. Taken at the moment the ``SubAgent`` call
runs (:func:`fork_source`), the fork's history is:

1. the parent's messages up to and including the assistant message that holds the pending
   ``SubAgent`` call: the parent's system prompt and history unchanged, the same message
   objects, so the parent's last request is the prefix;
2. one result for every call of that step, each :data:`NOT_RUN_HERE` (the calls run in the
   parent's conversation, not in the fork's): no tool call is left without a result, and
   forks started in one step share their history up to here;
3. one user message (:func:`start_fork`): that the conversation now continues as a fork,
   the role's own prompt with its memory (the project instructions are already in the
   parent's prompt), the tools it may use, what its ``SubagentStart`` hooks add, then the
   task (after the role's ``initialPrompt``).

What follows the role, and what does not:

* **Tools.** The request lists the parent's tools, unchanged, followed by any of the role's
  that the parent lacks (:class:`ForkTools`): a changed tool list would miss the cache, since
  providers put tools first. Only the role's tools run; a call to another of the listed tools
  is refused as for any tool the role does not have.
* **Memory.** The role's memory is rendered into the fork's message, its memory tools follow
  its capabilities, and when the fork ends it consolidates into the role's memory **only what
  it added** (from its message on): the inherited prefix is the parent's, which consolidates
  it itself, so no history is written twice, however many forks share it.
* **Model.** The parent's: a prompt cache belongs to one model, and the inherited turns are
  that model's. A role's ``model:`` is not used by a fork (a notice says so).
* **Every other rule** is the sub-agent's own: admission (depth, ``delegates``, no cycles),
  permissions (the role's mode and hooks narrow the parent's gate), budgets, ownership,
  cleanup at the parent's end, ``AskParent``. A role that names a remote A2A agent cannot
  fork: the whole conversation would leave the process.

A fork of a fork starts from its parent fork's conversation, which starts with the
grandparent's: the prefixes nest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from retinue.engine.session import Consolidation, current_session
from retinue.errors import SubAgentError
from retinue.events import NOTICE, emit
from retinue.messages import AssistantMessage, Message, ToolCall, ToolResultMessage
from retinue.policy.hooks import hooks_of, session_began
from retinue.tools.base import ToolContext, ToolRegistry

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from retinue.engine.config import ContextKeeper
    from retinue.engine.session import Session
    from retinue.llm.base import Model, ToolSpec
    from retinue.subagents.factory import AgentFactory
    from retinue.subagents.roles import Role

__all__ = ["NOT_RUN_HERE", "ForkSource", "ForkTools", "fork_source", "start_fork"]

NOT_RUN_HERE = "[not run in this fork: the calls of this step run in the parent's conversation]"
FORK_NOTE = (
    "[The conversation above is your parent's ({parent}), up to the SubAgent call that "
    "started you. From here on you are {id}, a fork of it working as the {role!r} "
    "sub-agent: your parent does not see what you do here, only your final answer.]"
)
TOOLS_NOTE = (
    "## Your tools\nYou may use {names}. The tool list you see is your parent's, kept as it "
    "is so the prompt cache still applies (any of yours it lacks come after it); a call to a "
    "tool not named here is refused."
)


@dataclass(frozen=True, slots=True)
class ForkSource:
    """What a fork inherits, taken when the parent's ``SubAgent`` call runs."""

    parent_id: str
    prefix: tuple[Message, ...]  # through the assistant message holding the pending call
    pending: tuple[ToolCall, ...]  # that message's calls
    tools: tuple[ToolSpec, ...]  # the tool list of the parent's requests
    model: Model
    keeper: ContextKeeper | None


def fork_source(ctx: ToolContext, role: Role | None) -> ForkSource:
    """The running conversation of ``ctx``'s agent, to fork; refused (before anything is
    created) when there is none, or when ``role`` is a remote A2A agent."""
    if role is not None and role.a2a is not None:
        raise SubAgentError(
            f"cannot fork into {role.name!r}: it is a remote A2A agent, and a fork would send "
            "it this whole conversation; delegate to it without fork"
        )
    parent = current_session()
    if parent is None or parent.config.context.agent_id != ctx.agent_id:
        raise SubAgentError(
            "fork=true needs a conversation to fork, and this run has none: delegate without fork"
        )
    messages = parent.messages
    at = next(
        (i for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], AssistantMessage)),
        None,
    )
    step = messages[at] if at is not None else None
    if at is None or not isinstance(step, AssistantMessage) or not step.tool_calls:
        raise SubAgentError("fork=true works only from a tool call of a running turn")
    config = parent.config
    return ForkSource(
        parent_id=parent.id,
        prefix=tuple(messages[: at + 1]),
        pending=step.tool_calls,
        tools=tuple(config.tools.specs()),
        model=config.model,
        keeper=config.context_keeper,
    )


class ForkTools(ToolRegistry):
    """The role's tools, listed to the model as the parent's list (unchanged, for the cache)
    followed by the role's tools the parent lacks; only the role's run."""

    __slots__ = ("_listed", "_listed_names")

    def __init__(self, own: ToolRegistry, listed: Sequence[ToolSpec]) -> None:
        names = frozenset(s.name for s in listed)
        super().__init__(
            own._own(),
            withheld=own._withheld | (names - set(own.names)),  # refused, not "unknown"
            sources=own._sources,
        )
        self._listed, self._listed_names = tuple(listed), names

    def specs(self) -> list[ToolSpec]:
        return [*self._listed, *(s for s in super().specs() if s.name not in self._listed_names)]


class _OwnPart:
    """A fork's consolidation: the role's, given only the messages the fork added."""

    __slots__ = ("inherited", "inner")

    def __init__(
        self,
        inherited: tuple[Message, ...],
        inner: Callable[[Sequence[Message]], Awaitable[Consolidation]],
    ) -> None:
        self.inherited, self.inner = inherited, inner

    async def __call__(self, messages: Sequence[Message]) -> Consolidation:
        # by identity: a compressed history keeps the fork's own messages, not their places
        seen = {id(m) for m in self.inherited}
        own = [m for m in messages if id(m) not in seen]
        return await self.inner(own) if own else "none"


async def start_fork(
    factory: AgentFactory, source: ForkSource, role: Role, session: Session, task: str
) -> str:
    """Make the new ``session`` of ``role`` a fork of ``source``; return its first message.

    The inherited history is in place before this awaits anything, so nothing can be sent
    to the session in between."""
    if session.messages or session.turns or session.tasks():
        raise SubAgentError(
            f"fork=true starts a new session, and {session.id} already exists: continue it "
            "without fork, or give another instance"
        )
    text = factory.first_turn(role, session, task)  # (its initialPrompt: still empty here)
    session.set_recorder(None)  # not durable: rebuilt elsewhere it would lose its parent's
    # model, tool list and inherited part (retinue.durable revives a session of its role)
    config = session.config
    own_model = config.model
    config.model, config.context_keeper = source.model, source.keeper
    config.tools = ForkTools(config.tools, source.tools)
    history = session.messages
    history.extend(source.prefix)
    history.extend(ToolResultMessage(c.id, c.name, NOT_RUN_HERE) for c in source.pending)
    inherited = tuple(history)
    consolidate = session.lifecycle.consolidate
    if consolidate is not None:
        session.lifecycle = replace(session.lifecycle, consolidate=_OwnPart(inherited, consolidate))
    ctx = config.context
    if role.model is not None and own_model is not source.model:
        emit(ctx.events, NOTICE, session.id, text=(
            f"role {role.name!r} asks for {role.model}; the fork {session.id} runs on its "
            f"parent's model {source.model.name}, whose prompt cache it reuses"
        ))  # fmt: skip
    return await _fork_message(factory, source, role, ctx, config.tools.names, text)


async def _fork_message(
    factory: AgentFactory,
    source: ForkSource,
    role: Role,
    ctx: ToolContext,
    tools: Sequence[str],
    task: str,
) -> str:
    parts = [
        FORK_NOTE.format(parent=source.parent_id, id=ctx.agent_id, role=role.name),
        "## Your role\n" + await factory.system_prompt(role, ctx, fork=True),
        TOOLS_NOTE.format(names=", ".join(tools) or "no tools"),
    ]
    added = (await session_began(ctx)).strip() if hooks_of(ctx) is not None else ""
    if added:  # SubagentStart: what its hooks add joins the role's part
        parts.append(added)
    parts.append("## Your task\n" + task)
    return "\n\n".join(parts)
