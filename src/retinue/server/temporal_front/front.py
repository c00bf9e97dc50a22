"""The front end's state and its ways to the workflows: :class:`TemporalFront` (what each
route asks of Temporal, and of the workers' store when it is given one), its errors and their
HTTP statuses, and how a turn's steps become events (see the package's docstring)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from fastapi import Request
from starlette.exceptions import HTTPException
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
    WorkflowUpdateHandle,
    WorkflowUpdateStage,
)
from temporalio.service import RPCError, RPCStatusCode

from retinue._tasks import cancel_and_wait
from retinue.engine.config import RunOutput
from retinue.errors import ModelError, RetinueError, RoleError
from retinue.events import (
    APPROVAL_REQUESTED,
    Event,
    EventSink,
    TextDelta,
    ToolFinished,
    ToolStarted,
    make_event,
)
from retinue.messages import (
    AssistantMessage,
    Message,
    ToolResultMessage,
    Usage,
    from_dict,
    shown_dict,
)
from retinue.server.app import (
    error_status,
)
from retinue.server.conversations import ServerBusy, agent_id_for, valid_conversation_id
from retinue.server.openai_api import (
    MODEL,
)
from retinue.server.transcripts import TranscriptReader
from retinue.store.blobs import BlobStore
from retinue.store.transcripts import TranscriptStore
from retinue.telemetry import trace as _tel
from retinue.temporal._types import (
    WORKFLOW_NAME,
    ConversationState,
    HistoryPage,
    Json,
    Outline,
    SessionNode,
    Spent,
    TurnReply,
)
from retinue.temporal.client import (
    MessageTooLarge,
    NoWorker,
    TemporalConversations,
    role_run_agent,
    workflow_id,
)
from retinue.temporal.refs import resolve_history
from retinue.temporal.workflow import ConversationWorkflow
from retinue.tools.base import preview

__all__ = ["TemporalFront", "TemporalUnavailable", "front_status", "tenant_of", "transcript_reader"]

_log = logging.getLogger(__name__)

IDEMPOTENCY_HEADER = "Idempotency-Key"
_MAX_LISTED = 100  # conversations GET /v1/conversations shows (each is one query)
_MAX_SESSIONS = 200  # sessions GET /v1/sessions shows (each is one query)
_MAX_SESSION_ID = 1_000  # characters of a session id a request may send
_SHOWN_STATES = {"busy": "running", "paused": "running"}  # the service's names (a paused
# session's turn runs: it waits for an approval, which the conversation's approvals list)
_PAST_ANY_END = 1 << 53  # a ``history_since`` start past any history: its length alone
MESSAGE_SPAN = "retinue.message"  # a turn's span here: its trace's root (or the caller's child)


class TemporalUnavailable(RetinueError):
    """The Temporal server, or every worker of the task queue, did not answer (503)."""


class TurnStopped(ModelError):
    """The workflow ended the turn with a reason (its model or tool calls failed, or the
    history grew past one payload): 502, as a failed model call is in process."""


class ConversationClosed(RetinueError):
    """The conversation's workflow refused the message: it is closed (409)."""


class UnknownRole(RoleError):
    """A ``retinue/<role>`` model names no role the workers know (404, as in-process)."""


def front_status(exc: BaseException) -> tuple[int, str]:
    """The HTTP status and one-line message for an error of a Temporal turn."""
    if isinstance(exc, TemporalUnavailable):
        return 503, str(exc)
    if isinstance(exc, UnknownRole):
        return 404, str(exc)
    if isinstance(exc, ConversationClosed):
        return 409, str(exc)
    if isinstance(exc, MessageTooLarge):
        return 413, str(exc)
    return error_status(exc)


@dataclass(slots=True)
class TemporalFront:
    """The conversations of every tenant, as workflows on ``client``; with the workers'
    store, its ``blobs`` (content kept by reference, shown whole) and its ``transcripts``
    (of the sessions that closed)."""

    client: Client
    tenant: str = "default"  # the service's own tenant (its token's)
    task_queue: str = "retinue"
    poll_s: float = 0.2  # how often a streamed turn reads the workflow's history
    wait_for_worker_s: float = 60.0  # a turn waits this long for a worker, then 503
    max_turns: int = 64  # turns this front end waits on at once, every tenant's together
    max_tenant_turns: int = 16  # of those, one tenant's (so that none takes them all)
    blobs: BlobStore | None = None  # None: a stub shows its note
    transcripts: TranscriptStore | None = None  # None: the transcript routes are not served
    _turns: dict[str, int] = field(default_factory=dict, init=False)  # in flight, by tenant
    _total: int = field(default=0, init=False)

    def queue(self, tenant: str) -> str:
        """The task queue of ``tenant``'s workers."""
        return self.task_queue if tenant == self.tenant else f"{self.task_queue}-{tenant}"

    def conversations(self, tenant: str) -> TemporalConversations:
        return TemporalConversations(self.client, tenant=tenant, task_queue=self.queue(tenant))

    async def history(self, tenant: str, cid: str) -> list[Message] | None:
        """The history of the conversation's running workflow, in full; None when there is
        none."""
        handle = self.conversations(tenant).handle(cid)
        if not await _running(handle):
            return None
        async with _reaching():
            raw = await _raw_history(handle)
        return [from_dict(m) for m in await self.resolved(tenant, raw)]

    async def resolved(self, tenant: str, raw: list[Json]) -> list[Json]:
        """A workflow's history with its content kept by reference read back from the
        workers' store, the tenant's only (:func:`~retinue.temporal.refs.resolve_history`;
        without the store, or where it cannot be read, a stub shows its note)."""
        return await resolve_history(raw, self.blobs, tenant)

    async def state(self, tenant: str, cid: str) -> dict[str, Any] | None:
        """What the conversation's workflow shows (``running``, ``question``, ``approvals``),
        agent ids as the service names them; None when none runs."""
        state = await self._tree(tenant, cid)
        if state is None:
            return None
        return {
            "running": state.state == "busy",
            "state": state.state,
            "question": state.question,
            "approvals": [_approval(a, cid) for a in state.approvals],
        }

    async def _tree(self, tenant: str, cid: str) -> ConversationState | None:
        """The conversation's ``state`` query (its session tree with it); None when no
        workflow of it runs."""
        handle = self.conversations(tenant).handle(cid)
        if not await _running(handle):
            return None
        async with _reaching():
            return await handle.query(ConversationWorkflow.state)

    async def sessions(self, tenant: str, cid: str | None = None) -> list[dict[str, Any]]:
        """The open sessions of the conversation ``cid`` (None: of each of the tenant's
        running conversations), each with its ``session_view``; at most ``_MAX_SESSIONS``."""
        if cid is not None:
            cids, trees = [cid], [await self._tree(tenant, cid)]
        else:  # (a conversation closed since it was listed, or failing, is left out)
            cids = [c for c, _ in await self._listed(tenant)]
            trees = await asyncio.gather(*(self._tree(tenant, c) for c in cids),
                                         return_exceptions=True)  # fmt: skip
        nodes = [(c, n) for c, tree in zip(cids, trees, strict=True)
                 if isinstance(tree, ConversationState) for n in tree.sessions]  # fmt: skip
        nodes = nodes[:_MAX_SESSIONS]
        views = await asyncio.gather(  # (a session that closed meanwhile: its node alone)
            *(self._child(n).query(ConversationWorkflow.session_view) for _, n in nodes),
            return_exceptions=True,
        )
        return [session_json(n, c, v if isinstance(v, dict) else None)
                for (c, n), v in zip(nodes, views, strict=True)]  # fmt: skip

    async def session(self, tenant: str, sid: str) -> dict[str, Any] | None:
        """Sub-agent session ``sid`` of the tenant (``conv-CID/role...``) with its history;
        None when its conversation holds no open session of that id."""
        found = await self.node(tenant, sid)
        if found is None:
            return None
        cid, node = found
        handle = self._child(node)
        try:
            async with _reaching():
                view = await handle.query(ConversationWorkflow.session_view)
                raw = await _raw_history(handle)
        except TemporalUnavailable as exc:
            if _missing(exc):  # (it closed since the tree was read)
                return None
            raise
        history = [shown_dict(from_dict(m)) for m in await self.resolved(tenant, raw)]
        return {**session_json(node, cid, view), "history": history}

    async def node(self, tenant: str, sid: str) -> tuple[str, SessionNode] | None:
        """The conversation id and the tree's node of the tenant's sub-agent session
        ``sid``, as the conversation's own workflow reports it (a request never names a
        workflow id); None when there is none."""
        cid = conversation_of(sid)
        if cid is None or sid == agent_id_for(cid):
            return None
        tree = await self._tree(tenant, cid)
        below = f"{workflow_id(tenant, cid)}/"  # (its tree's child workflows, and no other)
        for node in tree.sessions if tree is not None else []:
            if outside(node.agent_id, cid) == sid and node.workflow_id.startswith(below):
                return cid, node
        return None

    def _child(self, node: SessionNode) -> WorkflowHandle[ConversationWorkflow, object]:
        return self.client.get_workflow_handle_for(ConversationWorkflow.run, node.workflow_id)

    async def approve(
        self, tenant: str, cid: str, request_id: str, *, allow: bool, message: str,
        always: bool = False,
    ) -> bool:  # fmt: skip
        """Answer the pending approval ``request_id`` of the conversation (any session in
        it); False when none is pending by that id."""
        convs = self.conversations(tenant)
        if not await _running(convs.handle(cid)):
            return False
        try:
            async with _reaching():
                await convs.approve(cid, request_id, allow=allow, message=message,
                                    always=always)  # fmt: skip
        except WorkflowUpdateFailedError:  # (its validator: no such request pending)
            return False
        return True

    async def interrupt(self, tenant: str, cid: str) -> bool | None:
        """Cancel the conversation's running turn (False: none ran); None when no
        conversation of that id runs."""
        convs = self.conversations(tenant)
        if not await _running(convs.handle(cid)):
            return None
        async with _reaching():
            return await convs.cancel_turn(cid)

    async def interrupt_session(self, tenant: str, sid: str) -> bool | None:
        """Cancel the running turn of session ``sid``: ``conv-CID``'s (the conversation's,
        with the turns its sessions run for it) or a sub-agent session's alone (its child
        workflow's ``cancel_turn``: its own sessions' turns for it end too; its parent's turn
        goes on and reads that it was interrupted). False: none ran; None: no such session."""
        cid = conversation_of(sid)
        if cid is not None and sid == agent_id_for(cid):
            return await self.interrupt(tenant, cid)
        found = await self.node(tenant, sid)
        if found is None:
            return None
        try:
            async with _reaching():
                return await self._child(found[1]).execute_update(ConversationWorkflow.cancel_turn)
        except TemporalUnavailable as exc:
            if _missing(exc):  # (it closed since the tree was read)
                return None
            raise

    async def _listed(self, tenant: str) -> list[tuple[str, float]]:
        """The ids of the tenant's running conversations (not their sessions' child
        workflows, of the same type and queue) and when each started; at most
        ``_MAX_LISTED``."""
        prefix = f"retinue/{tenant}/"
        query = (
            f"WorkflowType = '{WORKFLOW_NAME}' AND ExecutionStatus = 'Running' AND "
            f"TaskQueue = '{self.queue(tenant)}'"
        )
        found: list[tuple[str, float]] = []
        async with _reaching():
            async for w in self.client.list_workflows(query, limit=10 * _MAX_LISTED):
                cid = w.id.removeprefix(prefix)
                if w.id.startswith(prefix) and valid_conversation_id(cid):  # (no "/": a root)
                    found.append((cid, w.start_time.timestamp()))
                if len(found) == _MAX_LISTED:
                    break
        return found

    async def views(self, tenant: str) -> list[dict[str, Any]]:
        """The tenant's running conversations, the latest started first."""
        found = await self._listed(tenant)
        convs = self.conversations(tenant)
        outlines = await asyncio.gather(  # (each its outline, not its whole history)
            *(convs.handle(cid).query(ConversationWorkflow.outline) for cid, _ in found),
            return_exceptions=True,
        )
        views: list[dict[str, Any]] = []
        for (cid, started), outline in zip(found, outlines, strict=True):
            known = outline if isinstance(outline, Outline) else Outline(0, "")
            views.append(
                {
                    "id": cid,
                    "title": known.opening[:80],
                    "messages": known.messages,
                    "updated_at": started,
                    "running": False,
                    "question": None,
                }
            )
        return sorted(views, key=lambda v: -v["updated_at"])

    async def delete(self, tenant: str, cid: str) -> bool:
        """Close the conversation's workflow (its history stays in Temporal's retention);
        False when none runs. A later message starts a new conversation of that id."""
        handle = self.conversations(tenant).handle(cid)
        if not await _running(handle):
            return False
        async with _reaching():
            await handle.signal(ConversationWorkflow.close)
        return True

    def start(
        self,
        tenant: str,
        cid: str,
        text: str,
        *,
        on_event: EventSink | None = None,
        message_id: str | None = None,
        role: str | None = None,
    ) -> asyncio.Task[RunOutput]:
        """Run one turn of ``cid`` (its workflow started if need be) as a task; with
        ``on_event``, the turn's steps are sent to it as the workers take them. With
        ``role``, ``cid`` is new and the turn is a one-shot run of that role, whose
        conversation's workflow closes itself with it (consolidated), whether or not this
        front end lives that long: :meth:`TemporalConversations.start_role_run`."""
        self._admit(tenant)
        task = asyncio.create_task(self._turn(tenant, cid, text, on_event, message_id, role))
        task.add_done_callback(lambda _t: self._done(tenant))
        return task

    def _admit(self, tenant: str) -> None:
        """Count a turn of ``tenant`` in, or refuse it (:class:`ServerBusy`: 429) past either
        bound: ``max_tenant_turns`` for the tenant, ``max_turns`` for the front end."""
        held = self._turns.get(tenant, 0)
        if held >= self.max_tenant_turns:
            raise ServerBusy(
                f"tenant {tenant!r} has {held} turns in progress on this front end, its limit"
                f" (max_tenant_turns={self.max_tenant_turns}); retry later"
            )
        if self._total >= self.max_turns:
            raise ServerBusy(
                f"{self._total} turns are in progress on this front end, every tenant's"
                f" together (max_turns={self.max_turns}); retry later"
            )
        self._turns[tenant] = held + 1
        self._total += 1

    def _done(self, tenant: str) -> None:
        self._total -= 1
        self._turns[tenant] -= 1
        if not self._turns[tenant]:
            del self._turns[tenant]

    async def _turn(
        self, tenant: str, cid: str, text: str, sink: EventSink | None, message_id: str | None,
        role: str | None,
    ) -> RunOutput:  # fmt: skip
        """The turn in its ``retinue.message`` span (the trace's root: see
        :mod:`retinue.temporal.tracing`)."""
        attributes = {"gen_ai.conversation.id": cid, "retinue.tenant": tenant,
                      "retinue.streamed": sink is not None}  # fmt: skip
        convs = self.conversations(tenant)
        convs.check_message(text)  # (too large: 413, and nothing started)
        with _tel.span(MESSAGE_SPAN, **attributes):
            return await self._turn_traced(convs, cid, text, sink, message_id, role)

    async def _turn_traced(
        self, convs: TemporalConversations, cid: str, text: str, sink: EventSink | None,
        message_id: str | None, role: str | None,
    ) -> RunOutput:  # fmt: skip
        try:
            async with _reaching():
                watched, seen, update = await _started(convs, cid, text, message_id, role,
                                                       self.wait_for_worker_s)  # fmt: skip
                handle = watched.turn
            reply = await self._follow(watched, update.result(), seen, sink)
        except WorkflowUpdateFailedError as exc:  # refused, or the turn ended with a reason
            raise _refused(exc, role) from None
        tools: list[str] = []
        with contextlib.suppress(TemporalUnavailable):  # (the reply is what matters)
            async with _reaching():
                tools = _tools_of(await handle.query(ConversationWorkflow.last_turn))
        return RunOutput(reply.content, [], _stop_reason(reply.stop_reason), tools,
                         _usage(reply.spent))  # fmt: skip

    async def _follow(
        self,
        watched: _Watched,
        outcome: Awaitable[TurnReply],
        seen: int,
        sink: EventSink | None,
    ) -> TurnReply:
        """Await the turn's ``outcome``; meanwhile send ``sink`` its steps past ``seen`` and
        the approval requests that come up (anywhere in the conversation's tree)."""
        result = asyncio.ensure_future(outcome)
        asked: set[str] = set()
        handle, cid = watched.turn, watched.cid
        try:
            while sink is not None:
                done, _ = await asyncio.wait({result}, timeout=self.poll_s)
                with contextlib.suppress(RPCError, WorkflowQueryFailedError):  # (next time)
                    page = await handle.query(ConversationWorkflow.history_since, seen)
                    seen = _publish(page, seen, watched.agent, sink)
                    if not done:
                        pending = await watched.root.query(ConversationWorkflow.approvals)
                        _ask(pending, asked, cid, sink)
                if done:
                    break
            async with _reaching():
                return await result
        finally:
            if not result.done():  # (the caller went away: the turn goes on without it)
                await cancel_and_wait(result)


@dataclass(slots=True, frozen=True)
class _Watched:
    """A turn a front end follows: the workflow that runs it, the conversation's (whose
    ``approvals`` query holds the tree's), and the agent its events name."""

    turn: WorkflowHandle[Any, Any]
    root: WorkflowHandle[Any, Any]
    cid: str
    agent: str


async def _started(
    convs: TemporalConversations, cid: str, text: str, message_id: str | None,
    role: str | None, wait_s: float,
) -> tuple[_Watched, int, WorkflowUpdateHandle[TurnReply]]:  # fmt: skip
    """The turn's Update, accepted; what to watch of it and the history's length before it:
    the main agent's ``send`` (its workflow started if need be, and a worker answering it
    within ``wait_s``, streamed or not: else 503), or (``role``) the ``run_role`` Update that
    starts the new conversation ``cid``, whose run begins with an empty history (a worker
    begins it within ``wait_s``: else it is ended, and 503)."""
    if role is not None:
        try:
            update = await convs.start_role_run(cid, role, text, wait_s=wait_s)
        except NoWorker as exc:
            raise TemporalUnavailable(str(exc)) from None
        agent = role_run_agent(convs.tenant, cid, role).agent_id
        return _Watched(convs.role_run(cid, role), convs.handle(cid), cid,
                        outside(agent, cid)), 0, update  # fmt: skip
    handle = await convs.start(cid)
    seen = (await _when_served(handle, wait_s)).total
    update = await handle.start_update(ConversationWorkflow.send, text, id=message_id,
                                       wait_for_stage=WorkflowUpdateStage.ACCEPTED)  # fmt: skip
    return _Watched(handle, handle, cid, agent_id_for(cid)), seen, update


def _usage(spent: Spent) -> Usage:
    """A turn's usage as a turn's output carries it (its cost is not part of it)."""
    return Usage(spent.input_tokens, spent.output_tokens, spent.cache_read_tokens,
                 spent.requests)  # fmt: skip


def _stop_reason(reason: str) -> Any:
    return reason  # "final", "max_iterations" or "asking" (a question: the next message)


def outside(agent_id: str, cid: str) -> str:
    """A workflow's agent id (``CID``, ``CID/researcher``) as the service names it
    (``conv-CID``, ``conv-CID/researcher``)."""
    if agent_id == cid or agent_id.startswith(f"{cid}/"):
        return f"conv-{agent_id}"
    return agent_id


def worker_id(sid: str) -> str | None:
    """A session id as the service names it (``conv-CID/...``) as the workers' agents name
    it (``CID/...``, in their transcripts); None when it names no conversation's session."""
    return sid.removeprefix("conv-") if conversation_of(sid) is not None else None


def service_ids(data: Any) -> Any:
    """Transcript summaries (a list of them, or one with its ``children``) with their
    ``session_id`` and ``parent_id`` as the service names them (:func:`outside`)."""
    if isinstance(data, list):
        return [service_ids(d) for d in data]  # pyright: ignore[reportUnknownVariableType]
    if not isinstance(data, dict):
        return data
    shown: dict[str, Any] = dict(data)  # pyright: ignore[reportUnknownArgumentType]
    for key in ("session_id", "parent_id"):
        if isinstance(known := shown.get(key), str):
            shown[key] = outside(known, known.partition("/")[0])
    if "children" in shown:
        shown["children"] = service_ids(shown["children"])
    return shown


def transcript_reader(request: Request, front: TemporalFront) -> TranscriptReader:
    """What a request reads of the transcripts the workers kept: its tenant's, with the ids
    as the service names them."""
    return TranscriptReader(tenant_of(request, front), front.transcripts, worker_id, service_ids)


def conversation_of(sid: str) -> str | None:
    """The conversation whose tree a session id names (``conv-CID`` or ``conv-CID/...``);
    None when it names none (not so, too long, or a bad conversation id)."""
    if len(sid) > _MAX_SESSION_ID or not sid.startswith("conv-"):
        return None
    cid = sid.removeprefix("conv-").partition("/")[0]
    return cid if valid_conversation_id(cid) else None


def session_json(node: SessionNode, cid: str, view: Json | None = None) -> dict[str, Any]:
    """A session as the service's ``/v1/sessions`` routes show one: its node in the tree
    and (``view``) what its ``session_view`` query said (else null): its tokens and cost
    too (null from a worker that does not count them, and a cost null when unknown)."""
    name = node.agent_id.rpartition("/")[2]  # ``role[:instance]``, or ``role#n``: one-shot
    seen = view or {}
    return {
        "id": outside(node.agent_id, cid),
        "parent_id": outside(node.parent_id, cid),
        "role": node.role,
        "instance": name.partition(":")[2] or None,
        "kind": "one-shot" if "#" in name else "interactive",
        "state": _SHOWN_STATES.get(node.state, node.state),
        "turns": node.turns,
        "messages": seen.get("messages"),
        "last_reply": seen.get("last_reply", ""),
        "question": seen.get("question"),
        **_tokens(seen),
    }


def _tokens(view: Json) -> dict[str, Any]:
    """The tokens a ``session_view`` says (null where it says none)."""
    given, taken = view.get("input_tokens"), view.get("output_tokens")
    if not (isinstance(given, int) and isinstance(taken, int)):
        return {"tokens": None, "input_tokens": None, "output_tokens": None, "cost_usd": None}
    return {"tokens": given + taken, "input_tokens": given, "output_tokens": taken,
            "cost_usd": view.get("cost_usd")}  # fmt: skip


def _approval(raw: dict[str, Any], cid: str) -> dict[str, Any]:
    return {**raw, "agent_id": outside(str(raw.get("agent_id", "")), cid)}


def _ask(pending: list[dict[str, Any]], asked: set[str], cid: str, sink: EventSink) -> None:
    """Send ``sink`` an ``approval_requested`` event for each request not ``asked`` yet."""
    for raw in pending:
        shown = _approval(raw, cid)
        if shown["id"] not in asked:
            asked.add(shown["id"])
            data = {k: v for k, v in shown.items() if k != "agent_id"}
            sink(make_event(APPROVAL_REQUESTED, shown["agent_id"], data))


def _refused(exc: WorkflowUpdateFailedError, role: str | None = None) -> RetinueError:
    why = str(getattr(exc.cause, "message", None) or exc.cause)
    if role is not None and why.startswith(f"unknown role {role!r}"):  # (a worker's)
        return UnknownRole(f"model {MODEL}/{role} not found: {why}")
    if "closed" in why:
        return ConversationClosed(f"the conversation is closed: {why}")
    if why.startswith("Stopped:"):
        return TurnStopped(why)
    return RetinueError(f"the message was refused: {why}")


async def _running(handle: WorkflowHandle[Any, Any]) -> bool:
    try:
        async with _reaching():
            described = await handle.describe()
    except TemporalUnavailable as exc:
        if _missing(exc):
            return False
        raise
    return described.status == WorkflowExecutionStatus.RUNNING


def _missing(exc: TemporalUnavailable) -> bool:
    """Whether Temporal answered that the workflow is not there (rather than failing)."""
    cause = exc.__cause__
    return isinstance(cause, RPCError) and cause.status == RPCStatusCode.NOT_FOUND


async def _raw_history(handle: WorkflowHandle[Any, Any]) -> list[dict[str, Any]]:
    return await handle.query(ConversationWorkflow.history)


_TIMED_OUT = (RPCStatusCode.DEADLINE_EXCEEDED, RPCStatusCode.CANCELLED)  # ("Timeout expired")


async def _when_served(handle: WorkflowHandle[Any, Any], wait_s: float) -> HistoryPage:
    """The history's length, once a worker answers the query: none may poll yet (starting),
    and a turn's Update would wait for one as long as none comes (asked first, the query
    leaves nothing behind); :class:`TemporalUnavailable` when none answered in ``wait_s``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    while True:
        left = timedelta(seconds=max(deadline - loop.time(), 0.1))
        try:  # (from past its end: the length alone, no message)
            return await handle.query(ConversationWorkflow.history_since, _PAST_ANY_END,
                                      rpc_timeout=left)  # fmt: skip
        except RPCError as exc:
            unserved = "poller" in exc.message  # ("no poller seen for task queue recently")
            if not (unserved or exc.status in _TIMED_OUT):  # (the query's own rpc_timeout)
                raise
            if loop.time() >= deadline:
                raise TemporalUnavailable(
                    f"no worker answered within {wait_s:g} s (is a `retinue worker --temporal`"
                    f" serving this tenant's task queue?): {exc.message}"
                ) from exc
        await asyncio.sleep(0.2)


@asynccontextmanager
async def _reaching() -> AsyncIterator[None]:
    """Temporal's failures to answer as :class:`TemporalUnavailable` (one line)."""
    try:
        yield
    except RPCError as exc:
        raise TemporalUnavailable(f"Temporal: {exc.message}") from exc
    except WorkflowQueryFailedError as exc:
        raise TemporalUnavailable(f"Temporal: the query failed: {exc.message}") from exc


def _publish(page: HistoryPage, seen: int, agent: str, sink: EventSink) -> int:
    """Send ``sink`` the events of ``page``'s messages (those past ``seen``); the new count.
    (A history that AutoCompress shortened is read on from where it was.)"""
    for row in page.messages:
        for event in _events_of(from_dict(row), agent):
            sink(event)
    return max(seen, page.total)


def _events_of(message: Message, agent: str) -> list[Event]:
    if isinstance(message, AssistantMessage):
        said: list[Event] = [TextDelta(agent_id=agent, text=message.content)]
        calls = [
            ToolStarted(agent_id=agent, call_id=c.id, name=c.name, arguments=c.arguments)
            for c in message.tool_calls
        ]
        return [*(said if message.content else []), *calls]
    if isinstance(message, ToolResultMessage):
        return [
            ToolFinished(
                agent_id=agent,
                call_id=message.tool_call_id,
                name=message.name,
                is_error=message.is_error,
                preview=preview(message.content),
            )
        ]
    return []


def _tools_of(turn: list[dict[str, Any]]) -> list[str]:
    """The tools the turn's messages (the ``last_turn`` query's) called, each once."""
    names: list[str] = []
    for m in map(from_dict, turn):
        if isinstance(m, AssistantMessage):
            names += [c.name for c in m.tool_calls if c.name not in names]
    return names


def tenant_of(request: Request, front: TemporalFront) -> str:
    principal = getattr(request.state, "principal", None)
    if principal is None:
        raise HTTPException(401, "missing or wrong bearer token")
    return principal.tenant or front.tenant
