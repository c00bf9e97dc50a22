"""Teams (issue 31, item 3): a lead starts several teammates as one team, with Claude Code's
tool names (``TeamCreate``, ``TeamDelete``, ``SendMessage``) and, where Retinue differs, its
own meaning.

A teammate is an interactive sub-agent session of the lead (key ``(lead, role, name)``, id
``lead/role:name``), so every session rule holds: one turn at a time, held by the lead and
ended with it, memory consolidated once when it ends, the lead's depth and delegation limits,
its budgets and permissions. Its turns run in the background (the lead goes on working and
collects the replies with ``SubAgentStatus(role, instance=name)``). Its first message names
the team, the lead and the other teammates, and says how to reach them and the shared task
list (:mod:`~retinue.subagents.tasklist`, the tree's list).

``SendMessage`` reaches a teammate by its name, the lead by ``team-lead``, and everyone else
of the team by ``*``. The lead ends one teammate with a shutdown request, ``SendMessage(to=
name, message={"type": "shutdown_request", "reason": ...})``: the teammate sees it before its
next step (or, idle, as one last turn), finishes that turn, and its session ends and
consolidates. Unlike Claude Code's, the request cannot be declined: the lead owns the
session and could unload it outright; a refusal would only add a way to hang. The teammate's
last reply reaches the lead as a message (or, with ``wait=true``, as the call's result).
``TeamDelete`` ends every teammate at once (their running turns are cancelled).

A lead leads one team at a time, and a teammate leads none (no nested teams, as in Claude
Code). Teams live in memory with their sessions (a team whose teammates have all ended is
forgotten when it is next looked up, or when any lead starts a team); the task list is stored.
"""

from __future__ import annotations

import asyncio
import json
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from retinue._tasks import finish
from retinue.engine.session import Session
from retinue.errors import RetinueError, SessionError, SubAgentError, ToolError
from retinue.memory.base import Memory
from retinue.store.tasks import task_store
from retinue.subagents.messaging import Messenger, messenger_of
from retinue.subagents.registry import SessionKey, SessionRegistry
from retinue.subagents.roles import valid_name
from retinue.tools.base import Tool, ToolContext, tool

__all__ = [
    "LEAD_NAME",
    "MAX_TEAMMATES",
    "TEAM_TOOL_NAMES",
    "Team",
    "TeamHost",
    "TeamMember",
    "Teams",
    "deliver",
    "team_tools",
    "teams_of",
]

MAX_TEAMMATES = 10  # per team, all at once
LEAD_NAME = "team-lead"  # Claude Code's name for the lead (also "lead")
BROADCAST = "*"
TEAM_TOOL_NAMES = frozenset({"TeamCreate", "TeamDelete"})
_RESERVED = frozenset({LEAD_NAME, "lead", "main", "parent", BROADCAST})

INTRO = (
    "[You are {name}, a teammate ({role}) in team {team!r}, led by {lead}.{purpose} "
    "Your teammates: {others}.\n"
    "- Message a teammate with SendMessage(to='<name>'), the lead with SendMessage(to="
    "'team-lead'), everyone with to='*'. The reply that ends each of your turns goes to the "
    "lead; to tell a teammate something, message it.\n{tasks}"
    "- When the lead asks you to shut down, wrap up{release} and say what you did; your "
    "session then ends.]\n\n"
    "Your task: {task}"
)
TASKS_NOTE = (
    "- The team shares a task list: TaskList, TaskGet(id), TaskCreate; claim a task with "
    "TaskUpdate(id, status='in_progress') (refused while another has it or while a task it "
    "depends on is open), and set status='completed' when it is done.\n"
)
RELEASE = ": release the tasks you will not finish (TaskUpdate(id, owner=''))"
SHUTDOWN_NOTE = (
    "[shutdown request from the lead: {reason}. Finish now{release} and reply with what you "
    "did; your session ends after this turn, and what you learned goes to your memory.]"
)


@runtime_checkable
class TeamHost(Protocol):
    """What a team needs of the sub-agent manager (``ctx.manager``)."""

    registry: SessionRegistry
    memory: Memory | None

    def start_background(
        self, ctx: ToolContext, task: str, role_name: str, instance: str | None = None
    ) -> str: ...


class TeamMember(BaseModel):
    """One teammate to start."""

    name: Annotated[str, Field(description="Its name in the team (letters, digits, _ . -)")]
    role: Annotated[str, Field(description="One of the available roles")]
    task: Annotated[str, Field(description="What it should do, complete enough to start")]


@dataclass(eq=False, slots=True)
class Member:
    name: str
    role: str
    session: Session
    ending: asyncio.Task[str] | None = None  # its shutdown, once requested

    @property
    def id(self) -> str:
        return self.session.id


@dataclass(eq=False, slots=True)
class Team:
    name: str
    lead: str
    tenant: str
    description: str = ""
    members: dict[str, Member] = field(default_factory=dict)

    def live(self) -> list[Member]:
        """The members whose sessions have not ended (the others are forgotten)."""
        for name in [n for n, m in self.members.items() if m.session.state == "closed"]:
            del self.members[name]
        return list(self.members.values())

    def roster(self, but: str | None = None) -> str:
        return ", ".join(f"{m.name} ({m.role})" for m in self.live() if m.name != but) or "none"

    def member(self, name_or_id: str) -> Member | None:
        found = self.members.get(name_or_id)
        if found is None:
            found = next((m for m in self.members.values() if m.id == name_or_id), None)
        return found if found is not None and found.session.state != "closed" else None

    def named(self, name: str) -> Member:
        found = self.member(name)
        if found is None:
            raise SubAgentError(f"no teammate {name!r} in team {self.name!r}: {self.roster()}")
        return found


class Teams:
    """The teams of one registry's sessions, by lead and by member (see the module)."""

    def __init__(self, registry: SessionRegistry) -> None:
        self.registry = registry
        self._led: dict[str, Team] = {}  # lead agent id -> its team
        self._of: dict[str, Team] = {}  # member session id -> its team

    def led_by(self, tenant: str, lead: str) -> Team | None:
        team = self._led.get(lead)
        if team is None or team.tenant != tenant:
            return None
        if not team.live():  # every teammate ended: the team is over
            self._forget(team)
            return None
        return team

    def joined_by(self, tenant: str, agent_id: str) -> Team | None:
        """The team ``agent_id`` is a live teammate of."""
        team = self._of.get(agent_id)
        if team is None or team.tenant != tenant or team.member(agent_id) is None:
            return None
        return team

    def of(self, tenant: str, agent_id: str) -> Team | None:
        """The team ``agent_id`` leads or belongs to."""
        return self.joined_by(tenant, agent_id) or self.led_by(tenant, agent_id)

    def _forget(self, team: Team) -> None:
        if self._led.get(team.lead) is team:
            del self._led[team.lead]
        for sid in [s for s, t in self._of.items() if t is team]:
            del self._of[sid]

    def _prune(self) -> None:
        for team in list(self._led.values()):
            if not team.live():
                self._forget(team)

    # -- starting ----------------------------------------------------------------------

    def create(
        self,
        ctx: ToolContext,
        host: TeamHost,
        name: str,
        members: list[TeamMember],
        description: str = "",
    ) -> str:
        """Start ``members`` as team ``name`` of ``ctx``'s agent (or add them to it)."""
        tenant, lead = ctx.tenant, ctx.agent_id
        name, description = " ".join(name.split())[:64] or "team", description.strip()[:1_000]
        if self.joined_by(tenant, lead) is not None:
            raise SubAgentError("a teammate cannot lead a team of its own (no nested teams)")
        self._prune()
        team = self.led_by(tenant, lead)
        if team is not None and team.name != name:
            raise SubAgentError(
                f"you lead team {team.name!r} already: add teammates with "
                f"TeamCreate(team_name={team.name!r}, ...), or end it with TeamDelete first"
            )
        team = team or Team(name, lead, tenant, description)
        self._check(team, host, lead, members)
        self._led[lead] = team
        started, failed = [], []
        for m in members:  # all registered before any first turn runs (nothing awaits)
            try:
                first = self._intro(team, m, members, tasks=_keeps_tasks(host))
                cid = host.start_background(ctx, first, m.role, m.name)
            except RetinueError as exc:
                failed.append(f"{m.name} ({m.role}): {exc}")
                continue
            held = host.registry.by_id(cid)
            if held is not None:
                team.members[m.name] = Member(m.name, m.role, held.session)
                self._of[cid] = team
                started.append(f"{m.name} ({m.role}, session {cid})")
        if not team.live():
            self._forget(team)
        return _created(team, started, failed)

    def _check(self, team: Team, host: TeamHost, lead: str, members: list[TeamMember]) -> None:
        if not members:
            raise SubAgentError("a team needs at least one member: {name, role, task}")
        names = [m.name for m in members]
        if len(team.live()) + len(members) > MAX_TEAMMATES:
            raise SubAgentError(f"a team has at most {MAX_TEAMMATES} teammates")
        for m in members:
            if not valid_name(m.name) or m.name in _RESERVED:
                raise SubAgentError(
                    f"invalid teammate name {m.name!r}: use letters, digits, '_', '-', '.' "
                    f"(at most 64), and none of {', '.join(sorted(_RESERVED))}"
                )
            if names.count(m.name) > 1 or m.name in team.members:
                raise SubAgentError(f"two teammates named {m.name!r}: give each its own name")
            if not m.task.strip():
                raise SubAgentError(f"teammate {m.name!r} has no task: say what it should do")
            if host.registry.get(SessionKey.of(lead, m.role, m.name)) is not None:
                raise SubAgentError(f"a session {lead}/{m.role}:{m.name} is open already")

    @staticmethod
    def _intro(team: Team, m: TeamMember, members: list[TeamMember], *, tasks: bool) -> str:
        batch = {o.name for o in members}
        others = [f"{o.name} ({o.role})" for o in team.live() if o.name not in batch]
        others += [f"{o.name} ({o.role})" for o in members if o.name != m.name]
        return INTRO.format(
            name=m.name, role=m.role, team=team.name, lead=team.lead,
            others=", ".join(others) or "none yet", task=m.task,
            purpose=f" The team is for: {team.description}." if team.description else "",
            tasks=TASKS_NOTE if tasks else "",
            release=RELEASE if tasks else "",
        )  # fmt: skip

    # -- addressing --------------------------------------------------------------------

    def address(self, tenant: str, sender: str, to: str) -> list[str] | None:
        """What the messenger should be given for ``to`` as ``sender``'s team names it: a
        session id per receiver (``*``: every other member of the team, the lead with
        them), or None when ``to`` is no team name (the messenger resolves it)."""
        team = self.of(tenant, sender)
        if team is None:
            return None
        to = to.strip()
        led = team.lead == sender
        if to in (LEAD_NAME, "lead"):
            if led:
                raise SubAgentError("you are the team's lead: message a teammate by name")
            return ["parent"]
        if to == BROADCAST:
            ids = [m.id for m in team.live() if m.id != sender]
            return ids if led else [*ids, "parent"]
        found = team.member(to)
        if found is None:
            return None
        if found.ending is not None:
            raise SubAgentError(f"{found.name} is shutting down: it takes no more messages")
        return [found.id]

    def owner_id(self, tenant: str, agent_id: str, owner: str | None) -> str | None:
        """A task owner as named in ``agent_id``'s team (a teammate's name, ``team-lead``) as
        the session id the task list keeps; anything else unchanged."""
        team = self.of(tenant, agent_id) if owner else None
        if team is None or owner is None:
            return owner
        if owner.strip() in (LEAD_NAME, "lead"):
            return team.lead
        found = team.member(owner.strip())
        return found.id if found is not None else owner

    # -- ending ------------------------------------------------------------------------

    async def shut_down(
        self, ctx: ToolContext, to: str, reason: str, *, wait: bool, messenger: Messenger
    ) -> str:
        """The lead's shutdown request to teammate ``to`` (see the module docstring)."""
        team = self.led_by(ctx.tenant, ctx.agent_id)
        if team is None:
            raise SubAgentError("only a team's lead sends shutdown requests, to its teammates")
        member = team.named(to)
        if member.ending is None:
            release = RELEASE if _keeps_tasks(ctx.manager) else ""
            note = SHUTDOWN_NOTE.format(
                reason=reason.strip() or "the work is done", release=release
            )
            lead = None if wait else _lead_session(messenger, ctx.tenant, member.id)
            member.ending = asyncio.create_task(_end(member, note, lead), name=f"end {member.id}")
        if wait:
            return await asyncio.shield(member.ending)  # a lead that stops waiting ends nothing
        return (
            f"[shutdown requested: {member.name} ({member.id}) finishes the turn it is in (or "
            "takes one last turn), then its session ends and its memory is consolidated; its "
            "last reply will reach you as a message]"
        )

    async def delete(self, ctx: ToolContext) -> str:
        """End every teammate of ``ctx``'s team now, and the team."""
        team = self.led_by(ctx.tenant, ctx.agent_id)
        if team is None:
            raise SubAgentError("you lead no team (or all its teammates have ended already)")
        members = team.live()
        closes = [m.session.closing() for m in members]
        await finish(asyncio.gather(*closes, return_exceptions=True))
        self._forget(team)
        lines = [f"- {m.name}: {_ended(m)}" for m in members]
        return f"team {team.name!r} deleted; its teammates ended:\n" + "\n".join(lines)


def _keeps_tasks(host: TeamHost | object) -> bool:
    """Whether the teammates get the task list tools (their memory store keeps tasks)."""
    return isinstance(host, TeamHost) and task_store(host.memory) is not None


def _lead_session(messenger: Messenger, tenant: str, member: str) -> Session | None:
    try:
        return messenger.resolve(tenant, member, "parent")
    except SubAgentError:  # a lead outside any session (a library caller): nobody to tell
        return None


async def _settled(session: Session) -> None:
    """Until no turn of ``session`` is queued or running, or one asks a question."""
    while session.question is None and (turns := session.tasks()):
        if session.background:
            await session.wait_background()  # (returns when one asks, too)
        else:
            await asyncio.wait(turns, return_when=asyncio.FIRST_COMPLETED)


async def _end(member: Member, note: str, lead: Session | None) -> str:
    """A shutdown: ``note`` reaches the teammate, its turns finish, it closes (consolidating
    once); the report goes to ``lead`` (or is returned, for a lead that waits)."""
    session = member.session
    try:
        if not session.steer(note):
            session.start(note)
    except SessionError:
        pass  # it was closing already
    await _settled(session)
    await session.close()
    report = f"[{member.name} ({member.id}) has shut down: {_ended(member)}]"
    if session.last_reply:
        report += f"\nIts last reply: {session.last_reply}"
    if lead is not None and lead.state not in ("closing", "closed"):
        text = f"[message from {member.id}: {report}]"
        if not lead.steer(text):
            lead.start(text)
    return report


def _ended(member: Member) -> str:
    s = member.session
    memory = {"done": "memory consolidated", "failed": "consolidating its memory failed"}
    return f"{s.turns} turn(s), {memory.get(s.consolidation or '', 'no memory kept')}"


def _created(team: Team, started: list[str], failed: list[str]) -> str:
    lines = [f"team {team.name!r} (lead {team.lead})"]
    if started:
        lines.append("started, working in the background: " + "; ".join(started))
    if failed:
        lines.append("not started: " + "; ".join(failed))
    if started:
        lines.append(
            "Collect a teammate's replies with SubAgentStatus(role=<its role>, instance=<its "
            "name>) (wait=true blocks), message it with SendMessage(to=<name>) ('*': all), end "
            "it with SendMessage(to=<name>, message={'type': 'shutdown_request', 'reason': "
            "...}), and the whole team with TeamDelete. Like your other sessions they end when "
            "your run does: collect what you need before you give your answer."
        )
    return "\n".join(lines)


_teams: weakref.WeakKeyDictionary[SessionRegistry, Teams] = weakref.WeakKeyDictionary()


def teams_of(registry: SessionRegistry) -> Teams:
    """The teams of ``registry``'s sessions (one per registry)."""
    return _teams.get(registry) or _teams.setdefault(registry, Teams(registry))


# -- SendMessage's routing -----------------------------------------------------------------

PROTOCOL_TYPES = frozenset({"shutdown_request", "shutdown_response", "plan_approval_response"})


def _protocol(message: str | Mapping[str, Any]) -> Mapping[str, Any] | None:
    """A structured message (a mapping, or JSON text of one) with a ``type`` of
    :data:`PROTOCOL_TYPES`, as Claude Code's teams send; None for plain text."""
    if isinstance(message, str):
        text = message.strip()
        if not (text.startswith("{") and '"type"' in text[:200]):
            return None
        try:
            parsed = json.loads(text)
        except ValueError:
            return None
        if not isinstance(parsed, dict):
            return None
        message = parsed  # pyright: ignore[reportUnknownVariableType]
    kind = message.get("type")
    if kind in PROTOCOL_TYPES or kind == "message":
        return message
    raise ToolError(
        f"unknown message type {kind!r}: send plain text, or (the lead, to a teammate) "
        "{'type': 'shutdown_request', 'reason': '...'}"
    )


async def deliver(
    ctx: ToolContext, registry: SessionRegistry, to: str, message: str | Mapping[str, Any],
    *, wait: bool = False,
) -> str:  # fmt: skip
    """What ``SendMessage`` does: team names and protocol messages here, the rest by the
    :class:`~retinue.subagents.messaging.Messenger`."""
    messenger, teams = messenger_of(registry), teams_of(registry)
    request = _protocol(message)
    if request is not None and request.get("type") != "message":
        return await _answer_protocol(ctx, teams, messenger, to, request, wait)
    text = message if isinstance(message, str) else str(message.get("content") or "")
    targets = teams.address(ctx.tenant, ctx.agent_id, to)
    if targets is None:
        targets = [to]  # no team name: the messenger resolves it
    elif not targets:
        raise SubAgentError("nobody else is in your team now")
    elif wait and to.strip() == BROADCAST:
        raise SubAgentError("wait=true needs one receiver, not '*'")
    out = [await messenger.send(ctx.tenant, ctx.agent_id, t, text, wait=wait) for t in targets]
    return "\n".join(out)


async def _answer_protocol(
    ctx: ToolContext, teams: Teams, messenger: Messenger, to: str,
    request: Mapping[str, Any], wait: bool,
) -> str:  # fmt: skip
    kind = request.get("type")
    if kind == "shutdown_request":
        if to.strip() == BROADCAST:
            raise SubAgentError("a shutdown request goes to one teammate by name, not '*'")
        reason = str(request.get("reason") or request.get("content") or "")[:2_000]
        return await teams.shut_down(ctx, to, reason, wait=wait, messenger=messenger)
    if kind == "shutdown_response":
        team = teams.joined_by(ctx.tenant, ctx.agent_id)
        me = team.member(ctx.agent_id) if team is not None else None
        if me is None or me.ending is None:
            raise SubAgentError("there is no shutdown request to answer")
        return (
            "[no answer is needed: a shutdown request here cannot be declined. Finish this "
            "turn (release the tasks you will not complete with TaskUpdate(id, owner='')); "
            "your session ends after it]"
        )
    raise SubAgentError("plan approval is not part of Retinue's teams: message plain text")


# -- the tools -----------------------------------------------------------------------------


def _host(ctx: ToolContext) -> TeamHost:
    if not isinstance(ctx.manager, TeamHost):
        raise ToolError("teams are not available in this run")
    return ctx.manager


@tool("TeamCreate")
async def team_create(
    ctx: ToolContext,
    team_name: Annotated[str, Field(description="A short name for the team")],
    members: Annotated[
        list[TeamMember],
        Field(description="The teammates to start now: each a name, a role and a task"),
    ],
    description: Annotated[str, Field(description="What the team is for")] = "",
) -> str:
    """Start a team: several sub-agents (same or different roles) that work in the
    background, message each other by name with SendMessage, and share the task list
    (TaskCreate, TaskList, TaskGet, TaskUpdate). Calling it again with the same team_name adds
    teammates. You are the team's lead; end it with TeamDelete."""
    host = _host(ctx)
    try:
        return teams_of(host.registry).create(ctx, host, team_name, members, description)
    except RetinueError as exc:
        raise ToolError(str(exc)) from None


@tool("TeamDelete")
async def team_delete(ctx: ToolContext) -> str:
    """End the team you lead: every teammate stops now (its running turn is cancelled) and
    its memory is consolidated. To let one teammate wrap up first, send it a shutdown request
    instead. The task list stays."""
    host = _host(ctx)
    try:
        return await teams_of(host.registry).delete(ctx)
    except RetinueError as exc:
        raise ToolError(str(exc)) from None


def team_tools() -> tuple[Tool, ...]:
    return team_create, team_delete
