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

**Results and errors.** A reply is its text, once (no structured copy of the same text). A
Retinue error (unknown role, bad instance, unknown session) is a tool error with its own
message, never the SDK's "Error executing tool" with a traceback on stderr. The server
names itself with Retinue's version.

**Questions.** A sub-agent's ``AskParent`` reaches the client within the same ``SubAgent``
call: at 2025-11-25 by elicitation, if the client declares it; at 2026-07-28 as an
``input_required`` result whose elicitation the client answers by retrying the call. The
answer goes to the same turn, which goes on (at most ``MAX_QUESTIONS`` rounds a call). A
client that cannot be asked, or declines, reads ``[session … asks: …]`` and answers with its
next ``SubAgent`` call, as Retinue's own agents do.

**Long runs.** At 2026-07-28 a client that declares the Tasks extension
(``io.modelcontextprotocol/tasks``) gets each ``SubAgent`` call as a task it polls
(``tasks/get``), answers the sub-agent's question of (``tasks/update``) and can cancel,
which interrupts the sub-agent's turn (see :mod:`retinue.mcp.server.tasks`); an approval a
sub-agent's call needs is asked there too. At 2025-11-25 a client that sends ``SubAgent``
with a ``task`` param gets the core spec's task: ``tasks/get``, ``tasks/list``,
``tasks/cancel``, and ``tasks/result``, through which a question is asked by elicitation;
it hears status changes and, with a progress token, the tree's progress (see
:mod:`retinue.mcp.server.tasks_2025`). Other calls get their result as before.

**Who the client is.** On stdio the client is one parent, ``mcp-client``. Over HTTP each
request's token decides (see :mod:`retinue.server.tokens`): the service's own token is the
parent ``mcp-client`` in the service's tenant, and a named token ``bo`` is the parent
``mcp-client-bo`` in its own tenant: its sessions, its memory and its progress notifications
are its own, and another token's holder can neither see nor unload them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from contextvars import ContextVar
from dataclasses import replace
from typing import Annotated, Any, TypeAlias

from mcp import types
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types.version import is_version_at_least
from pydantic import BaseModel, Field, ValidationError

from retinue.engine.session import ASKS_NOTE
from retinue.errors import RetinueError, SubAgentError
from retinue.events import TEXT_DELTA, Event
from retinue.mcp.client import retinue_version
from retinue.mcp.server.tasks import Asker, Reporter, TaskBook, Work
from retinue.mcp.server.tasks_2025 import PROGRESS_CHARS, BothTasks
from retinue.policy.approvals import Approval, ApprovalRequest
from retinue.runtime import Runtime
from retinue.server.tokens import Principal
from retinue.subagents.registry import Held
from retinue.subagents.tools import question_note, subagent, subagent_status, unload_subagent
from retinue.tools.base import Tool, ToolContext

__all__ = ["MAX_TASK_CHARS", "PARENT_ID", "build_server"]

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
    async def reporting(self, send: Callable[[int, Event], Awaitable[None]]
                        ) -> AsyncIterator[None]:  # fmt: skip
        """While it lasts, each event goes to ``send`` (with its number), in order."""
        queue: asyncio.Queue[Event | None] = asyncio.Queue()

        async def forward() -> None:
            sent = 0
            while (event := await queue.get()) is not None:
                sent += 1
                with suppress(Exception):  # a client that went away is not our failure
                    await send(sent, event)

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


MAX_TASK_CHARS = 100_000
"""The longest ``SubAgent`` task and the longest answer to a sub-agent's question, in
characters. Over HTTP the body limit bounds a whole request; over stdio nothing else does."""
MAX_REASON_CHARS = 500  # of a refusal's reason the sub-agent is told


class ApprovalForm(BaseModel):
    """What an MCP client is asked when a sub-agent's call needs a person's yes."""

    allow: bool = Field(description="Let this call run")
    always: bool = Field(default=False, description="Allow calls like it from now on")
    reason: str = Field(
        default="", max_length=MAX_REASON_CHARS, description="If not: why (the sub-agent is told)"
    )


Caller: TypeAlias = "Context[Any, Any] | Asker"

_CALLER: ContextVar[Caller | None] = ContextVar("retinue_mcp_caller", default=None)
"""The call or task of the client that the code running now belongs to: a sub-agent's turn
starts in its caller's context (a copy), so its approvals go back through that call."""


class Approvals:
    """The approver of one client's agents: asks the client, by elicitation, in the call
    or task whose sub-agent needs the approval (the one whose context the sub-agent's turn
    was started in), else in the client's latest running call."""

    def __init__(self) -> None:
        self._calls: list[Caller] = []

    @contextmanager
    def calling(self, caller: Caller) -> Iterator[None]:
        """While a call (its context) or a task (its way of asking) of the client runs."""
        self._calls.append(caller)
        token = _CALLER.set(caller)
        try:
            yield
        finally:
            _CALLER.reset(token)
            self._calls.remove(caller)

    def _caller(self) -> Caller | None:
        """The running call to ask through: the related one if it still runs."""
        related = _CALLER.get()
        if related is not None and any(c is related for c in self._calls):
            return related
        return self._calls[-1] if self._calls else None

    async def __call__(self, request: ApprovalRequest) -> Approval:
        mcp_ctx = self._caller()
        if mcp_ctx is not None and not isinstance(mcp_ctx, Context):
            return await _approved_in_task(mcp_ctx, request)
        if mcp_ctx is not None and _modern(mcp_ctx):
            return Approval(False, message=NO_ELICITATION_2026)
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


APPROVAL_KEY = "approval"  # the key of an approval in a task's input requests


async def _approved_in_task(ask: Asker, request: ApprovalRequest) -> Approval:
    """An approval asked of a task's client: the task is ``input_required`` until it answers
    with ``tasks/update``."""
    form = _form(f"Approve? {request.describe()}", ApprovalForm)
    response = (await ask({APPROVAL_KEY: _json(form)})).get(APPROVAL_KEY)
    action, content = (response.get("action"), response.get("content")) if isinstance(
        response, dict) else (None, None)  # fmt: skip
    try:
        data = ApprovalForm.model_validate(content) if action == "accept" else None
    except ValidationError:
        return Approval(False, message="the MCP client's answer was not an approval form")
    if data is None or not data.allow:
        why = data.reason if data is not None else f"the client answered {str(action)[:50]!r}"
        return Approval(False, message=why[:500])
    return Approval(True, always=data.always)


def _form(message: str, model: type[BaseModel]) -> types.ElicitRequest:
    """An elicitation of a form shaped as ``model``."""
    schema = model.model_json_schema()
    schema.pop("title", None)
    return types.ElicitRequest(
        params=types.ElicitRequestFormParams(message=message, requested_schema=schema)
    )


def _json(request: types.ElicitRequest) -> dict[str, Any]:
    return request.model_dump(by_alias=True, mode="json", exclude_none=True)


NO_ELICITATION = (
    "the MCP client cannot be asked (it does not declare elicitation): allow the call with a "
    "rule in .claude/settings.json or start `retinue mcp serve --permission-mode acceptEdits`"
)


NO_ELICITATION_2026 = (
    "the MCP client is connected at 2026-07-28, where Retinue cannot ask it for an approval "
    "within a call yet: allow the call with a rule in .claude/settings.json or start `retinue "
    "mcp serve --permission-mode acceptEdits`"
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
    return principal_in(request)


def principal_in(request: object) -> Principal | None:
    """The token's principal of an HTTP request (None: stdio, or none was put there)."""
    scope = getattr(request, "scope", None)
    state = scope.get("state") if isinstance(scope, dict) else None
    found = state.get("principal") if isinstance(state, dict) else None
    return found if isinstance(found, Principal) else None


MAX_QUESTIONS = 20  # rounds of a sub-agent's questions answered within one call
ANSWER_KEY = "answer"  # the key of the question in a 2026-07-28 input_required result
TASK_ARGUMENTS = frozenset({"task", "role", "interactive", "instance"})  # as SubAgent's


class AnswerForm(BaseModel):
    """What an MCP client is asked when a sub-agent asks its parent a question."""

    answer: str = Field(
        max_length=MAX_TASK_CHARS, description="Your answer to the sub-agent's question"
    )


def _failure(text: str) -> types.CallToolResult:
    """A Retinue error as the client reads it: its own message, no prefix, no traceback."""
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)


def _reply(text: str) -> types.CallToolResult:
    """A reply as text only: a structured copy of the same text would be read twice."""
    return types.CallToolResult(content=[types.TextContent(text=text)])


def _retinue_error(exc: BaseException) -> RetinueError | None:
    """The Retinue error ``exc`` is, or the only kind of error a group of them holds."""
    if isinstance(exc, RetinueError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        found, rest = exc.split(RetinueError)
        if found is not None and rest is None:
            while isinstance(found, BaseExceptionGroup):
                found = found.exceptions[0]
            return found if isinstance(found, RetinueError) else None
    return None


def _modern(mcp_ctx: Context[Any, Any]) -> bool:
    """Whether the call came at 2026-07-28 or later (input_required, no mid-call requests)."""
    version = mcp_ctx.protocol_version
    return version is not None and is_version_at_least(version, "2026-07-28")


def _asking(ctx: ToolContext, clients: Clients, reply: str) -> Held | None:
    """The session of ``ctx``'s agent whose question ``reply`` is, if it is one."""
    for held in clients.runtime.manager.registry.held_by(ctx.agent_id):
        question = held.session.question
        if question is not None and reply.startswith(
            ASKS_NOTE.format(id=held.id, question=question)
        ):
            return held
    return None


async def _answer(ctx: ToolContext, held: Held, answer: str) -> str:
    """Give a session's question its answer: its turn goes on, and its reply comes back."""
    args = {"task": answer, "role": held.role.name, "instance": held.key.instance,
            "interactive": True}  # fmt: skip
    return await subagent.invoke(ctx, json.dumps(args))


async def _ask_client(mcp_ctx: Context[Any, Any], held: Held) -> str | None:
    """Ask the client, by elicitation, the question ``held`` asks (None: it cannot be asked,
    or it did not answer: then it reads the question and answers with SubAgent)."""
    if not _can_elicit(mcp_ctx):
        return None
    try:
        result = await mcp_ctx.elicit(f"[session {held.id} asks] {held.session.question}",
                                      AnswerForm)  # fmt: skip
    except (MCPError, ValueError):
        return None
    data = result.data if result.action == "accept" else None
    return data.answer if data is not None and data.answer.strip() else None


def _input_required(held: Held) -> types.InputRequiredResult:
    """A 2026-07-28 client's question round: the session's question as an elicitation;
    the client retries the call with the answer and this state."""
    form = _form(f"[session {held.id} asks] {held.session.question}", AnswerForm)
    return types.InputRequiredResult(
        input_requests={ANSWER_KEY: form},
        request_state=json.dumps({"session": held.id}),
    )


def _retried_answer(mcp_ctx: Context[Any, Any]) -> tuple[str, str | None] | None:
    """A 2026-07-28 retry: the session it answers and the answer (None if not accepted)."""
    state = mcp_ctx.request_state
    if not state:
        return None
    try:
        cid = json.loads(state)["session"]
    except (json.JSONDecodeError, KeyError, TypeError):
        return None
    return (str(cid), _accepted((mcp_ctx.input_responses or {}).get(ANSWER_KEY)))


def _accepted(response: object) -> str | None:
    """The answer an elicitation response gives (typed, or as JSON in ``tasks/update``);
    None if it was not accepted or is blank."""
    if isinstance(response, dict):
        action, content = response.get("action"), response.get("content")
    else:
        action, content = getattr(response, "action", ""), getattr(response, "content", None)
    answer = content.get("answer") if action == "accept" and isinstance(content, dict) else None
    if not isinstance(answer, str) or len(answer) > MAX_TASK_CHARS:
        return None  # (an overlong answer is not taken: the question stays)
    return answer if answer.strip() else None


async def _delegate(ctx: ToolContext, clients: Clients, mcp_ctx: Context[Any, Any],
                    raw: str) -> str | types.InputRequiredResult:  # fmt: skip
    """``SubAgent``, with a sub-agent's questions asked of the client: by elicitation within
    the call (2025-11-25, a client that declares it), or as ``input_required`` rounds
    (2026-07-28). The answer goes to the same turn, which goes on."""
    retried = _retried_answer(mcp_ctx) if _modern(mcp_ctx) else None
    if retried is not None:
        cid, answer = retried
        held = clients.runtime.manager.registry.by_id(cid)
        if held is None or held.parent_id != ctx.agent_id or held.session.question is None:
            raise SubAgentError(f"session {cid} is not waiting for an answer")
        if answer is None:  # declined: the question stays, for a later SubAgent call
            return question_note(held.session.question, held.id, held.role.name,
                                 held.key.instance)  # fmt: skip
        reply = await _answer(ctx, held, answer)
    else:
        reply = await subagent.invoke(ctx, raw)

    async def ask(held: Held) -> str | types.InputRequiredResult | None:
        if not _modern(mcp_ctx):
            return await _ask_client(mcp_ctx, held)
        capabilities = mcp_ctx.client_capabilities
        can_elicit = capabilities is not None and capabilities.elicitation is not None
        return _input_required(held) if can_elicit else None

    return await _until_answered(ctx, clients, reply, ask)


Ask: TypeAlias = Callable[[Held], Awaitable[str | types.InputRequiredResult | None]]


async def _until_answered(ctx: ToolContext, clients: Clients, reply: str, ask: Ask
                          ) -> str | types.InputRequiredResult:  # fmt: skip
    """Each question a sub-agent of ``ctx``'s agent asks in ``reply``, asked by ``ask``
    and its answer given, until a reply that asks nothing (at most ``MAX_QUESTIONS``). If
    ``ask`` gets no answer the question's note is the reply; an ``input_required`` result
    ends the call (the client retries it with the answer)."""
    for _ in range(MAX_QUESTIONS):
        held = _asking(ctx, clients, reply)
        if held is None:
            break
        answer = await ask(held)
        if not isinstance(answer, str):
            return reply if answer is None else answer
        reply = await _answer(ctx, held, answer)
    return reply


async def _run(
    t: Tool, clients: Clients, mcp_ctx: Context[Any, Any], **arguments: Any
) -> types.CallToolResult | types.InputRequiredResult:
    """One of Retinue's own tools, run as the calling client, its events as progress, its
    failures as tool errors with their own message (none reaches the SDK as a crash)."""
    ctx, progress, approvals = clients.of(principal_of(mcp_ctx))
    raw = json.dumps({k: v for k, v in arguments.items() if v})

    async def report(sent: int, event: Event) -> None:
        await mcp_ctx.report_progress(sent, None, json.dumps(event.to_dict()))

    try:
        async with progress.reporting(report):  # (a task group: what it raises comes grouped)
            with approvals.calling(mcp_ctx):
                if t is subagent:
                    out = await _delegate(ctx, clients, mcp_ctx, raw)
                else:
                    out = await t.invoke(ctx, raw)
    except BaseException as exc:
        error = _retinue_error(exc)
        if error is None:
            raise
        return _failure(str(error))
    return out if isinstance(out, types.InputRequiredResult) else _reply(out)


def _task_work(clients: Clients) -> Work:
    """``SubAgent`` run as an MCP task: as :func:`_delegate`, but a sub-agent's question
    parks the task (``input_required``) until the client answers (``tasks/update`` at
    2026-07-28, elicitation within ``tasks/result`` at 2025-11-25); the events of the
    client's agents go to ``report`` while it runs."""

    async def work(principal: Principal | None, arguments: dict[str, Any], ask: Asker,
                   report: Reporter) -> types.CallToolResult:  # fmt: skip
        ctx, progress, approvals = clients.of(principal)
        task = arguments.get("task")
        if isinstance(task, str) and len(task) > MAX_TASK_CHARS:
            return _failure(f"the task is over {MAX_TASK_CHARS} characters")
        offered = {k: v for k, v in arguments.items() if v and k in TASK_ARGUMENTS}
        raw = json.dumps(offered)  # (not background, steer or fork: the tool has none)

        async def tell(_sent: int, event: Event) -> None:
            await report(_summary(event), _bounded(event))

        async def ask_client(held: Held) -> str | None:
            requests = _input_required(held).input_requests or {}
            asked = {k: _json(r) for k, r in requests.items() if isinstance(r, types.ElicitRequest)}
            try:
                return _accepted((await ask(asked)).get(ANSWER_KEY))  # declined: the note stays
            except asyncio.CancelledError:  # the task is cancelled: so is the turn that asks
                clients.runtime.manager.interrupt(held.id)
                raise

        try:
            async with progress.reporting(tell):  # (a task group: its errors come grouped)
                with approvals.calling(ask):  # a sub-agent's call to approve: asked in the task
                    reply = await _until_answered(ctx, clients, await subagent.invoke(ctx, raw),
                                                  ask_client)  # fmt: skip
        except Exception as exc:
            error = _retinue_error(exc)
            if error is None:
                raise
            return _failure(str(error))
        return _reply(str(reply))

    return work


def _summary(event: Event) -> str:
    """An event in a few words: a task's ``statusMessage`` while it works."""
    what = event.data.get("name") or event.data.get("action") or ""
    return f"{event.agent_id}: {event.kind} {str(what)[:100]}".strip()


def _bounded(event: Event, limit: int = PROGRESS_CHARS) -> str:
    """An event as JSON within ``limit`` characters: when too long, its long strings are
    cut and its nested data left out (``"truncated": true`` says so)."""
    whole = event.to_dict()
    text = json.dumps(whole)
    if len(text) <= limit:
        return text
    short = {k: v[:200] if isinstance(v, str) else v for k, v in whole.items()
             if v is None or isinstance(v, str | int | float | bool)}  # fmt: skip
    text = json.dumps({**short, "truncated": True})
    if len(text) <= limit:
        return text
    return json.dumps({"kind": event.kind, "agent_id": event.agent_id[:200], "at": event.at,
                       "truncated": True})  # fmt: skip


def build_server(runtime: Runtime, parent_id: str = PARENT_ID) -> MCPServer[Any]:
    """The MCP server of ``runtime``'s roles; its lifespan ends the client's sessions."""
    clients = Clients(runtime, parent_id)
    book = TaskBook(_task_work(clients))
    tasks = BothTasks(book, {"SubAgent"}, lambda ctx: principal_in(ctx.request))

    @asynccontextmanager
    async def lifespan(_server: MCPServer[Any]) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await book.close()
            for parent in clients.parents():
                await runtime.manager.cleanup(parent)
            await runtime.tools.close_sources()

    roles = "\n".join(f"- {r.name}: {r.description}" for r in runtime.catalog.roles.values())
    server: MCPServer[Any] = MCPServer(
        "retinue",
        version=retinue_version(),
        instructions=f"Retinue's sub-agents. Roles:\n{roles or '(none)'}",
        lifespan=lifespan,
        extensions=[tasks],
        middleware=[tasks.middleware],  # 2025-11-25's task-augmented calls
    )

    @server.tool(
        name="SubAgent",
        structured_output=False,
        description=f"{subagent.description}\n\nRoles:\n{roles}",
    )
    async def delegate(
        task: Annotated[
            str,
            Field(max_length=MAX_TASK_CHARS, description="The task or message for the sub-agent"),
        ],
        role: RoleArg,
        interactive: Annotated[
            bool, Field(description="Keep the session for later calls, until UnloadSubAgent")
        ] = False,
        instance: InstanceArg = None,
        *,
        mcp_ctx: Context[Any, Any],
    ) -> types.CallToolResult | types.InputRequiredResult:
        return await _run(subagent, clients, mcp_ctx, task=task, role=role,
                          interactive=interactive, instance=instance)  # fmt: skip

    @server.tool(
        name="UnloadSubAgent", structured_output=False, description=unload_subagent.description
    )
    async def unload(
        role: RoleArg, instance: InstanceArg = None, *, mcp_ctx: Context[Any, Any]
    ) -> types.CallToolResult | types.InputRequiredResult:
        return await _run(unload_subagent, clients, mcp_ctx, role=role, instance=instance)

    @server.tool(
        name="SubAgentStatus", structured_output=False, description=subagent_status.description
    )
    async def status(
        role: RoleArg, instance: InstanceArg = None, *, mcp_ctx: Context[Any, Any]
    ) -> types.CallToolResult | types.InputRequiredResult:
        return await _run(subagent_status, clients, mcp_ctx, role=role, instance=instance)

    @server.resource("retinue://roles", name="roles", mime_type="application/json")
    def role_list() -> str:
        return json.dumps(
            [{"name": r.name, "description": r.description} for r in runtime.catalog.roles.values()]
        )

    del delegate, unload, status, role_list  # registered on the server
    return server
