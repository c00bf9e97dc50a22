"""The ``SubAgent``, ``UnloadSubAgent``, ``SubAgentStatus``, ``FindRole`` and ``AskParent``
tools, and every sentence about sub-agents the model reads: tool descriptions, the roles
section of a parent's prompt, and the texts the manager answers with.

The roles section is bounded: up to :data:`MAX_LISTED_ROLES` roles whose (shortened)
descriptions fit :data:`ROLES_BUDGET_CHARS` are listed with what they do; past that only
names are listed, up to the same budget, and ``FindRole(query)`` searches the rest, so a
catalog of hundreds of roles does not inflate the parent's prompt."""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Annotated, Any, Protocol, runtime_checkable

from pydantic import Field

from retinue.engine.pause import ASK_TOOL_NAME
from retinue.engine.session import ASKS_NOTE, current_session
from retinue.errors import RetinueError, ToolError
from retinue.events import SESSION, emit
from retinue.policy.hooks import notify
from retinue.subagents.files import MAX_HANDED_FILES, Handed, handed_files
from retinue.subagents.messaging import messenger_of
from retinue.subagents.registry import registry_of
from retinue.subagents.team import deliver
from retinue.tools.base import Delegator, Tool, ToolContext, tool

if TYPE_CHECKING:
    from collections.abc import Sequence

    from retinue.engine.session import Consolidation
    from retinue.subagents.roles import Role, RoleCatalog

__all__ = [
    "ASK_TOOL_NAME",
    "NO_ANSWER",
    "SEND_TOOL_NAME",
    "SPAWN_TOOL_NAMES",
    "Steerer",
    "ask_parent",
    "background_note",
    "bounded_listing",
    "brief",
    "found_roles",
    "question_note",
    "roles_section",
    "send_message",
    "status_text",
    "steering_ack",
    "subagent_tools",
    "unknown_session",
    "unload_confirmation",
    "waiting_note",
]

SPAWN_TOOL_NAMES = frozenset({"SubAgent", "UnloadSubAgent", "SubAgentStatus", "FindRole"})
SEND_TOOL_NAME = "SendMessage"
NO_ANSWER = "(Nobody can answer now: decide yourself, and say what you assumed.)"
MAX_LISTED_ROLES = 30
ROLES_BUDGET_CHARS = 4500  # about 1.1k tokens (the skills section shares the budget)
BRIEF_CHARS = 160


def _manager(ctx: ToolContext) -> Delegator:
    if ctx.manager is None:
        raise ToolError("sub-agents are not available in this run")
    return ctx.manager


@runtime_checkable
class Steerer(Protocol):
    """A delegator that can also steer a running session (the sub-agent manager)."""

    async def steer(
        self, ctx: ToolContext, *, task: str, role: str, instance: str | None = None
    ) -> str: ...


@tool("SubAgent")
async def subagent(
    ctx: ToolContext,
    task: Annotated[str, Field(description="The task or message for the sub-agent")],
    role: Annotated[str, Field(description="Name of one of the available roles")],
    interactive: Annotated[
        bool,
        Field(
            description="If true, keep the sub-agent alive for a multi-turn conversation: "
            "later SubAgent calls with the same role (and instance) continue it. "
            "Use UnloadSubAgent to end it."
        ),
    ] = False,
    instance: Annotated[
        str | None,
        Field(
            description="A name for this session, needed only to keep several sessions of "
            "one role open at once"
        ),
    ] = None,
    background: Annotated[
        bool,
        Field(
            description="With interactive=true: return at once and let the sub-agent work "
            "while you go on; collect its reply later with SubAgentStatus"
        ),
    ] = False,
    steer: Annotated[
        bool,
        Field(
            description="With interactive=true, to a session that is working: give it this "
            "message at once, before its next step, instead of after its whole turn; you get "
            "an acknowledgement and go on"
        ),
    ] = False,
    fork: Annotated[
        bool,
        Field(
            description="Start the sub-agent from this conversation as it is now (your "
            "instructions, what was said and found so far) instead of an empty one, so the task "
            "can be short; it works with its role's tools and memory"
        ),
    ] = False,
    files: Annotated[
        list[Annotated[str, Field(max_length=4096)]] | None,
        Field(
            description="Files to hand the sub-agent with the task: workspace paths (images, "
            "PDFs or text files), or the name of a file attached earlier in this "
            "conversation; it sees them after your message",
            max_length=MAX_HANDED_FILES,
        ),
    ] = None,
) -> str:
    """Delegate a task to a sub-agent with a predefined role and return its answer.

    One-shot by default: the sub-agent works in a fresh conversation and its answer comes
    back. With interactive=true the sub-agent keeps its conversation between calls. If the
    sub-agent asks you a question, your next SubAgent message to it is the answer.
    """
    manager = _manager(ctx)
    if steer and fork:
        raise ToolError("steer=true messages a working session; fork=true starts a new one")
    if steer and files:
        raise ToolError("files go with a message of their own: send them without steer=true")
    if steer:
        if not isinstance(manager, Steerer):
            raise ToolError("steering is not available in this run")
        return await manager.steer(ctx, task=task, role=role, instance=instance)
    if files and not _hands_parts(manager):  # a Delegator of a program's own, from before
        raise ToolError("handing files to a sub-agent is not available in this run")
    handed = await handed_files(ctx, files) if files else Handed()  # (subagents.files)
    more = {"parts": handed.parts} if handed.parts else {}  # (such a Delegator: plain tasks)
    return await manager.delegate(
        ctx,
        task=handed.task(task),
        role=role,
        interactive=interactive,
        instance=instance,
        background=background,
        fork=fork,
        **more,
    )


def _hands_parts(manager: Delegator) -> bool:
    """Whether ``manager.delegate`` takes ``parts`` (a program's own may predate them)."""
    params = inspect.signature(manager.delegate).parameters.values()
    return any(p.name == "parts" or p.kind is p.VAR_KEYWORD for p in params)


@tool("UnloadSubAgent")
async def unload_subagent(
    ctx: ToolContext,
    role: Annotated[str, Field(description="Role name of the interactive sub-agent to end")],
    instance: Annotated[
        str | None, Field(description="The instance name, if the session was given one")
    ] = None,
) -> str:
    """End an interactive sub-agent session and consolidate its memory.

    The sub-agent's conversation learnings are persisted to its memory system.
    """
    return await _manager(ctx).unload(ctx, role, instance)


@tool("SubAgentStatus")
async def subagent_status(
    ctx: ToolContext,
    role: Annotated[str, Field(description="Role name of the interactive sub-agent")],
    instance: Annotated[
        str | None, Field(description="The instance name, if the session was given one")
    ] = None,
    wait: Annotated[
        bool, Field(description="Wait until its background turns have finished")
    ] = False,
) -> str:
    """Check an interactive sub-agent session: whether it is still working, and the replies
    of background turns that finished since you last checked."""
    return await _manager(ctx).poll(ctx, role, instance, wait=wait)


@tool("FindRole")
async def find_role(
    ctx: ToolContext,
    query: Annotated[str, Field(description="A few words about the work to hand over")],
) -> str:
    """Search the roles you can delegate to by name and description; returns the best
    matches with what each is for."""
    return _manager(ctx).find_roles(ctx, query)


@tool(ASK_TOOL_NAME)
async def ask_parent(
    ctx: ToolContext,
    question: Annotated[str, Field(description="The question, complete enough to answer alone")],
) -> str:
    """Ask whoever gave you this task (your parent agent, or the user) a question and wait
    for the answer, which this call returns; your work goes on where it was. Use it only
    when you cannot go on well without the answer."""
    session = current_session()
    if session is None:
        raise ToolError("there is nobody to ask in this run: decide yourself and say so")
    if not question.strip():
        raise ToolError("the question is empty")
    emit(ctx.events, SESSION, session.id, action="asking", question=question)
    await notify(ctx, f"{session.id} asks: {question[:500]}", "agent_question")  # hooks
    answer = await session.ask(question)
    emit(ctx.events, SESSION, session.id, action="answered")
    return answer


@tool(SEND_TOOL_NAME)
async def send_message(
    ctx: ToolContext,
    to: Annotated[
        str,
        Field(
            description="Who: 'main' (the main agent), 'parent', a sibling's or child's "
            "role[:instance], or a session id of your team"
        ),
    ],
    message: Annotated[
        str | dict[str, Any],
        Field(
            description="The message, complete enough to act on; a team's lead ends a "
            "teammate with {'type': 'shutdown_request', 'reason': '...'}"
        ),
    ],
    wait: Annotated[bool, Field(description="Wait for the receiver's reply and return it")] = False,
) -> str:
    """Send a message to another session of your team: it sees it (and that it is from you)
    before its next step if it is working, or as its next turn if it is idle. In a team
    (TeamCreate), name a teammate, 'team-lead', or '*' for everyone."""
    registry = registry_of(ctx.manager)
    if registry is None:
        raise ToolError("messages between sessions are not available in this run")
    if ctx.depth == 0:
        messenger_of(registry).saw(ctx.tenant, current_session())
    try:
        return await deliver(ctx, registry, to, message, wait=wait)  # (retinue.subagents.team)
    except RetinueError as exc:
        raise ToolError(str(exc)) from None


def subagent_tools() -> tuple[Tool, ...]:
    return subagent, unload_subagent, subagent_status, find_role


# -- what the manager answers with -------------------------------------------------------


def brief(description: str, limit: int = BRIEF_CHARS) -> str:
    """A description cut to its first ``limit`` characters, before any examples."""
    text = " ".join(description.replace("\\n", " ").split("<example>")[0].split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def bounded_listing(
    items: Sequence[tuple[str, str]], *, most: int, budget: int
) -> tuple[str | None, str]:
    """``(one line per (name, text), or None when they do not fit; names only)``: the lines
    when there are at most ``most`` and they fit ``budget`` characters, else None and as
    many names as fit the budget (the rest counted)."""
    lines = [f"- {name}: {text}" for name, text in items]
    if len(lines) <= most and sum(len(line) + 1 for line in lines) <= budget:
        return "\n".join(lines), ""
    names: list[str] = []
    size = 0
    for name, _ in items:
        size += len(name) + 2
        if size > budget:
            break
        names.append(name)
    more = len(items) - len(names)
    return None, ", ".join(names) + (f" … and {more} more" if more else "")


def _roles_listing(roles: Sequence[Role]) -> str:
    items = [(r.name, brief(r.description)) for r in roles]
    lines, names = bounded_listing(items, most=MAX_LISTED_ROLES, budget=ROLES_BUDGET_CHARS)
    if lines is not None:
        return "Available roles:\n" + lines
    return (
        f"{len(roles)} roles are available; call FindRole(query) to find the right one and "
        f"see what it does. Their names: {names}."
    )


def roles_section(catalog: RoleCatalog, only: Sequence[str] | None = None) -> str:
    """The part of a parent's system prompt that lists whom it can delegate to (``only``:
    the roles this parent may call, when it is limited to some)."""
    roles = [r for r in catalog.roles.values() if only is None or r.name in only]
    return (
        "## Sub-agents\n"
        "You can delegate with the SubAgent tool (task, role). Pass interactive=true to keep "
        "the sub-agent for a multi-turn conversation (and instance=... for several sessions of "
        "one role); end such a session with UnloadSubAgent when you are done with it. With "
        "interactive=true and background=true the sub-agent works while you go on; collect its "
        "reply with SubAgentStatus.\n" + _roles_listing(roles)
    )


def found_roles(roles: Sequence[Role], query: str) -> str:
    """What ``FindRole`` answers."""
    if not roles:
        return f"no role matches {query!r}; try other words"
    return "\n".join(f"- {r.name}: {brief(r.description, 400)}" for r in roles)


def _how(role: str, instance: str | None) -> str:
    return f"role={role!r}" + (f", instance={instance!r}" if instance else "")


def _next_message(head: str, waits: str, role: str, instance: str | None, task: str) -> str:
    how = _how(role, instance)
    return (
        f"{head}\n\n[{waits}: continue with SubAgent({how}, interactive=true, task={task}), "
        f"end it with UnloadSubAgent({how})]"
    )


def waiting_note(reply: str, cid: str, role: str, instance: str | None) -> str:
    waits = f"interactive session {cid} is waiting for your next message"
    return _next_message(reply, waits, role, instance, "...")


def question_note(question: str, cid: str, role: str, instance: str | None) -> str:
    """What the parent reads when a session asks it something: the question, marked."""
    head = ASKS_NOTE.format(id=cid, question=question)
    return _next_message(head, "it waits for your answer", role, instance, "<your answer>")


def steering_ack(cid: str, role: str, instance: str | None, *, answered: bool) -> str:
    """What the parent reads at once after steering a working session."""
    how = _how(role, instance)
    if answered:
        return (
            f"[session {cid} was waiting on a question: your message is its answer, and it "
            f"goes on in the background; collect its reply with SubAgentStatus({how})]"
        )
    return (
        f"[steering delivered to session {cid}: it sees your message before its next model "
        f"call, and its reply will say so; if it works in the background, collect that reply "
        f"with SubAgentStatus({how})]"
    )


def background_note(cid: str, role: str, instance: str | None) -> str:
    return (
        f"[interactive session {cid} is working on it in the background: collect its "
        f"reply with SubAgentStatus({_how(role, instance)}) (wait=true blocks until it is done)]"
    )


def status_text(cid: str, state: str, turns: int, pending: int, replies: list[str]) -> str:
    head = f"Session {cid}: {state}, {turns} turn(s) done"
    if pending:
        head += f", {pending} background turn(s) still to finish"
    if not replies:
        return head + "; no new replies."
    numbered = "\n\n".join(f"[{i}] {r}" for i, r in enumerate(replies, 1))
    return f"{head}. New replies:\n\n{numbered}"


def unload_confirmation(cid: str, turns: int, outcome: Consolidation, *, began: bool = True) -> str:
    """What the parent reads after an unload: what really happened to the memory."""
    if not began:
        return f"Session {cid} ended before its first turn began; there was nothing to consolidate."
    head = f"Session {cid} ended after {turns} turn(s); "
    if outcome == "done":
        return head + "what it learned was consolidated into its memory."
    if outcome == "failed":
        return head + (
            "consolidating its memory failed (the transcript is kept and "
            "`retinue memory retry` writes it later)."
        )
    return head + "no memory is configured, so nothing of it was kept."


def unknown_session(cid: str, live: list[str]) -> str:
    return (
        f"no interactive session {cid!r}; this agent's live sessions: {', '.join(live) or 'none'}"
    )
