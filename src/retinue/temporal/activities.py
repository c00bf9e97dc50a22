"""The activities of a conversation workflow: a model call, a tool call, the admission of a
sub-agent session, and a session's memory consolidation.

They run on a worker's :class:`~retinue.runtime.Runtime` (the model, the tools, the roles,
the memory, the policy), as the agent the step names (the main agent of conversation
``conversation_id``, or a sub-agent session of it, :class:`~retinue.temporal._types.Agent`)
would run them in a ``retinue run``. Activities run at least once: each knows its
idempotency key (:func:`idempotency_key`, for a tool that talks to another system). The
model call's reply names the tools it calls that are ``idempotent``: the workflow tries
their calls again, and runs the others once (:mod:`retinue.temporal.workflow`); a try that
comes anyway (the worker that asked the model knew the tool as idempotent, this one does
not) is not run: the model is told it was cut short, as a restarted durable session tells
it (:data:`~retinue.durable.revive.RESTARTED_RESULT`). A call the policy would put to
a person does not run: the activity returns the approval request, the workflow waits for the
answer and runs the call again with it (given only to a request for the same call,
:func:`~retinue.policy.approvals.answer_fits`). An "always" answer adds, as in-process, the
rule made from the call (:func:`~retinue.policy.rules.rule_for`) to the policy: the activity
returns it, the workflows keep the tree's rules and give them to each later tool call's
activity, whose policy allows what they match. AutoCompress runs before each model call,
and the history it shortened goes back to the workflow, with the call's usage and cost
(priced as in process). The program's guards run in the
model activity as in a run's loop: ``before_model`` on what the call sends (rewritten, or
the call refused), ``on_answer`` on a reply without tool calls (rewritten, or withheld); a
refusal comes back as the note that closes the turn (``ModelReply.refused``). A guard that
asks a person is refused there (nobody is asked yet). A consolidation runs under the
session's run id, so the memory store writes it once however often it is tried. While a
call runs, the activity beats (Temporal's heartbeat), so a dead worker's call is noticed
after ``Limits.heartbeat_s``, and a cancelled turn's cancel reaches the call (it is
cancelled) at its next beat. Content too large for a Temporal payload goes to the worker's
memory store (:mod:`retinue.temporal.refs`): a tool call's large result comes back as a
stub, and the model call stores the history it was sent and returns its stub; the model
call and a consolidation read every stub back, under the step's tenant only. A
consolidation keeps the session's transcript first, once however often it is tried
(:mod:`retinue.temporal.transcripts`); a close that consolidates nothing (the main agent's,
a session's before its first turn) keeps it alone (``KEEP_ACTIVITY``).
"""

from __future__ import annotations

import asyncio
import contextvars
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError

from retinue.engine.config import RunConfig
from retinue.errors import RetinueError
from retinue.memory.consolidate import consolidation_run
from retinue.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    Usage,
    from_dict,
    to_dict,
)
from retinue.policy.approvals import Approval, ApprovalRequest, answer_fits
from retinue.policy.gate import Policy
from retinue.policy.rules import Rule
from retinue.runtime import Runtime
from retinue.store.blobs import BlobMissing, BlobStore, HoldsBlobs
from retinue.subagents.roles import Role
from retinue.telemetry.prices import cost_usd
from retinue.temporal._calls import cut_short
from retinue.temporal._types import (
    CONSOLIDATE_ACTIVITY,
    KEEP_ACTIVITY,
    MODEL_ACTIVITY,
    NOT_ON_TEMPORAL,
    OPEN_ACTIVITY,
    TOOL_ACTIVITY,
    WORKFLOW_TOOLS,
    Agent,
    ApprovalAnswer,
    ConsolidateStep,
    Json,
    ModelReply,
    ModelStep,
    OpenReply,
    OpenStep,
    Spent,
    ToolOutcome,
    ToolStep,
)
from retinue.temporal.refs import BlobCache, Expanded, Refs, is_stub
from retinue.temporal.tracing import chat, tool_call
from retinue.temporal.transcripts import keep_transcript
from retinue.tools.base import CallGate, Tool, ToolContext

__all__ = ["TurnActivities", "idempotency_key"]

T = TypeVar("T")
MAX_ALLOWED = 1_000  # "always" rules one tool call's policy takes (the tree's first ones)
MAX_TIMEOUT_S = 86_400.0  # the most a tool may declare of one call's time (a day)
MAX_TRIES = 20  # and of its tries

_key: contextvars.ContextVar[str] = contextvars.ContextVar("retinue_temporal_key", default="")


def idempotency_key() -> str:
    """The running activity's idempotency key (``workflow id/step[/call id]``), or ``""``
    outside one: the same on every attempt of one call, different for every other call."""
    return _key.get()


@dataclass(slots=True)
class _Run:
    """What one agent of a conversation runs with, built for one activity."""

    config: RunConfig
    prompt: Callable[[], Awaitable[str]]
    role: Role | None  # None: the main agent


@dataclass(slots=True)
class _Asked:
    """The approver of a tool call activity: the answer the workflow brings, given to the
    same call only; else the request is kept (the call does not run) for the workflow."""

    call_id: str
    answered: ApprovalRequest | None
    answer: ApprovalAnswer | None
    asked: ApprovalRequest | None = None

    def __call__(self, request: ApprovalRequest) -> Approval:
        answer, answered = self.answer, self.answered
        if answer is not None and answered is not None and answer_fits(answered, request):
            return Approval(answer.allow, answer.allow and answer.always, answer.message)
        if request.call_id == self.call_id and self.asked is None:
            self.asked = request  # (the call is refused now and asked about in the workflow)
            return Approval(False, message="waiting for a person's answer")
        return Approval(False, message="nobody can answer this on Temporal")  # (a result's)


class TurnActivities:
    """The activities a worker registers, bound to its runtime."""

    def __init__(self, runtime: Runtime, blobs: BlobStore | None = None) -> None:
        self.runtime = runtime
        memory = runtime.memory
        if blobs is None and isinstance(memory, HoldsBlobs):  # (the store workers share)
            blobs = memory.blobs
        self._blobs = blobs
        self._cache = BlobCache()

    def activities(self) -> list[Callable[..., Any]]:
        return [self.model_call, self.tool_call, self.open_session, self.consolidate, self.keep]

    def _check_tenant(self, tenant: str) -> None:
        if tenant != self.runtime.settings.tenant:  # (one worker, one tenant's memory)
            raise ApplicationError(
                f"this worker serves tenant {self.runtime.settings.tenant!r}, not {tenant!r}",
                non_retryable=True,
            )

    def _run(
        self, tenant: str, conversation_id: str, agent: Agent | None, approver: _Asked | None = None
    ) -> _Run:
        self._check_tenant(tenant)
        conversation = self.runtime.conversation(conversation_id, approver=approver)
        if agent is None or not agent.chain:
            config = conversation.session.config
            return _Run(config, conversation.system_prompt, None)
        ctx = _descend(conversation.context, agent.chain)
        factory = self.runtime.manager.factory
        try:
            role = self.runtime.catalog.get(agent.role)
        except RetinueError as exc:  # (its role file went away since it opened)
            raise ApplicationError(str(exc), non_retryable=True) from exc
        config = factory.config(role, ctx, interactive=not agent.one_shot)
        return _Run(config, lambda: factory.system_prompt(role, config.context), role)

    def _refs(self, tenant: str) -> Refs | None:
        """The tenant's messages by reference (None: this worker has no store for them)."""
        return Refs(self._blobs, tenant, self._cache) if self._blobs is not None else None

    @activity.defn(name=MODEL_ACTIVITY)
    async def model_call(self, step: ModelStep) -> ModelReply:
        _key.set(step.key)
        run = self._run(step.tenant, step.conversation_id, step.agent)
        config = run.config
        tools = config.tools.without(NOT_ON_TEMPORAL)
        await tools.refresh(config.context)
        refs = self._refs(step.tenant)
        expanded, full = await _opened(refs, step.messages)
        history = [from_dict(m) for m in full]
        sent = [SystemMessage(await run.prompt()), *history]
        keeper = config.context_keeper  # AutoCompress, as a session's turn runs it
        if keeper is not None:
            await keeper.before_call(sent, config.model, config.context, step.last_input_tokens)
        kept = sent[1:]
        shortened = len(kept) != len(history) or any(
            a is not b for a, b in zip(kept, history, strict=True)
        )
        back = await _history_back(refs if step.inline_bytes > 0 else None, expanded, history,
                                   kept if shortened else None, step.inline_bytes)  # fmt: skip
        local = sorted(WORKFLOW_TOOLS.intersection(tools.names))
        gate, ctx = config.context.gate, config.context
        guarded = gate is not None and gate.guarded
        offered = sent
        if gate is not None and guarded:  # the program's guards: what is sent (loop's rule)
            offered, refused = await gate.screen_model_call(sent, config.model.name, ctx)
            if refused:
                note = AssistantMessage(f"Stopped: the model call was refused: {refused}")
                return ModelReply(to_dict(note), history=back.history, local=local,
                                  refused=True, stored=back.stored, spent=Spent())  # fmt: skip
        calling = _beating(config.model.complete(offered, tools.specs()))
        response = await chat(config.model.name, offered, calling)
        usage = response.usage
        message, stopped = response.message, False
        if gate is not None and guarded and not message.tool_calls:  # the answer's guards
            message, stopped = await _screened_answer(gate, message, ctx)
        called = [t for n in sorted({c.name for c in message.tool_calls})
                  if (t := tools.get(n)) is not None]  # fmt: skip
        reads = [t.name for t in called if t.idempotent]
        timeouts, attempts = _declared(called)
        return ModelReply(
            to_dict(message), usage.input_tokens, usage.output_tokens, back.history, local,
            reads, stopped, back.stored, timeouts, attempts, _spent(config.model.name, usage),
        )  # fmt: skip

    @activity.defn(name=TOOL_ACTIVITY)
    async def tool_call(self, step: ToolStep) -> ToolOutcome:
        _key.set(step.key)
        call = ToolCall(str(step.call["id"]), str(step.call["name"]), str(step.call["arguments"]))
        answered = ApprovalRequest(**step.answered) if step.answered is not None else None
        approver = _Asked(call.id, answered, step.answer)
        config = self._run(step.tenant, step.conversation_id, step.agent, approver).config
        tool = config.tools.get(call.name)
        if activity.info().attempt > 1 and not (tool is not None and tool.idempotent):
            return ToolOutcome(cut_short(call))
        gate, ctx = config.context.gate, config.context
        policy = gate if isinstance(gate, Policy) else None
        given = 0
        if policy is not None:
            for rule in step.allowed[:MAX_ALLOWED]:
                policy.allow_always(_rule(rule))
            given = len(policy.always_given())
        running = (
            gate.execute(config.tools, call, ctx)
            if gate is not None
            else config.tools.execute(call, ctx)
        )
        result = await tool_call(call, _beating(running))
        if approver.asked is not None:  # it did not run: a person is asked first
            return ToolOutcome(approval=approver.asked.to_dict())
        added = policy.always_given()[given:] if policy is not None else ()
        shown = to_dict(result)
        if (refs := self._refs(step.tenant)) is not None:  # a large one: by reference
            shown = await _stored(refs.keep(shown, step.inline_bytes))
        return ToolOutcome(shown, allowed=[_rule_data(r) for r in added])

    @activity.defn(name=OPEN_ACTIVITY)
    async def open_session(self, step: OpenStep) -> OpenReply:
        """Whether the session's role may be started by its parent, by the rules the
        in-process manager holds to (:meth:`SubAgentManager.check_start`): known, within the
        depth limit, among the parent's delegates, not already in the chain."""
        agent = step.agent
        self._check_tenant(step.tenant)
        parent = _descend(self.runtime.context(step.conversation_id), agent.chain[:-1])
        try:
            role = self.runtime.manager.check_start(parent, agent.role)
        except RetinueError as exc:
            return OpenReply(error=str(exc))
        caps = self.runtime.manager.caps.limits  # (counted by the conversation's workflow)
        return OpenReply("", role.initial_prompt or "", caps.per_run, caps.per_conversation,
                         caps.concurrent)  # fmt: skip

    @activity.defn(name=CONSOLIDATE_ACTIVITY)
    async def consolidate(self, step: ConsolidateStep) -> str:
        """Keep the session's transcript (where transcripts are kept), then write what it
        learned to its role's memory; each once per ``run_id``."""
        run = self._run(step.tenant, step.conversation_id, step.agent)
        assert run.role is not None  # (a sub-agent session's)
        messages = await _beating(self._kept(step, run))  # (a large history, a slow store)
        token = consolidation_run.set(step.run_id)  # (the store writes a run id once)
        try:
            factory = self.runtime.manager.factory
            return await _beating(factory.consolidate(run.role, run.config, messages))
        finally:
            consolidation_run.reset(token)

    @activity.defn(name=KEEP_ACTIVITY)
    async def keep(self, step: ConsolidateStep) -> None:
        """Keep the transcript of a session whose close consolidates nothing: the main
        agent's, or a session's that closed before its first turn; once per ``run_id``."""
        await _beating(self._kept(step, self._run(step.tenant, step.conversation_id, step.agent)))

    async def _kept(self, step: ConsolidateStep, run: _Run) -> list[Message]:
        """The closing session's history in full, its transcript kept first (where
        transcripts are kept)."""
        _, full = await _opened(self._refs(step.tenant), step.messages)
        messages = [from_dict(m) for m in full]
        if (keeper := self.runtime.manager.transcripts) is not None:
            await keep_transcript(keeper, step, run.config.context, messages)
        return messages


async def _screened_answer(
    gate: CallGate, message: AssistantMessage, ctx: ToolContext
) -> tuple[AssistantMessage, bool]:
    """An answer as the ``on_answer`` guards leave it, and whether it was withheld (then
    the note that closes the turn stands in its place: it is not kept), as a run's loop."""
    said, withheld = await gate.screen_answer(message.content, message.content, ctx)
    if withheld:
        return AssistantMessage(f"Stopped: the answer was withheld: {withheld}"), True
    return (message if said is message.content else replace(message, content=said)), False


def _spent(model: str, usage: Usage) -> Spent:
    """One call's usage, priced as in process (:func:`~retinue.telemetry.prices.cost_usd`)."""
    return Spent(usage.input_tokens, usage.output_tokens, usage.cache_read_tokens,
                 usage.requests, cost_usd(model, usage))  # fmt: skip


def _declared(tools: list[Tool]) -> tuple[dict[str, float], dict[str, int]]:
    """What ``tools`` declare of their calls' timeout and tries (bounded: a day, 20 tries)."""
    timeouts = {t.name: min(float(t.timeout_s), MAX_TIMEOUT_S) for t in tools
                if t.timeout_s is not None and t.timeout_s > 0}  # fmt: skip
    attempts = {t.name: max(1, min(int(t.attempts), MAX_TRIES)) for t in tools
                if t.attempts is not None}  # fmt: skip
    return timeouts, attempts


@dataclass(slots=True)
class _Back:
    """What a model call tells the workflow of its history: the history AutoCompress
    shortened (None: as sent), and the stub of the history as stored (None: not stored)."""

    history: list[Json] | None
    stored: Json | None


async def _opened(refs: Refs | None, messages: list[Json]) -> tuple[Expanded, list[Json]]:
    """A step's messages opened (their workflow forms) and in full. Content the store no
    longer keeps (swept, or another tenant's) reads as a note (:class:`Refs`); a stub that
    does not parse fails the activity for good."""
    if refs is None:
        if any(is_stub(m) for m in messages):
            raise ApplicationError(
                "the history holds content kept by reference, and this worker has no store"
                " to read it from (run workers with memory)",
                non_retryable=True,
            )
        return Expanded(list(messages), [], 0), list(messages)
    expanded = await _stored(refs.expand(messages))
    return expanded, [await _stored(refs.whole(m)) for m in expanded.forms]


async def _history_back(
    refs: Refs | None,
    expanded: Expanded,
    history: list[Message],
    kept: list[Message] | None,
    inline_bytes: int,
) -> _Back:
    """Store the history the call sends (``kept``, if AutoCompress shortened it) and say so.
    A shortened history goes back as its stub alone (stored in its workflow form: kept
    messages as they came, new ones by reference if large), so a shortening adds a stub to
    the workflow's history, not the whole history again."""
    if kept is None:
        if refs is None:
            return _Back(None, None)
        return _Back(None, await _stored(refs.store_run(expanded)))
    if refs is None:
        return _Back([to_dict(m) for m in kept], None)
    came = {id(m): i for i, m in enumerate(history)}
    forms = [
        expanded.forms[came[id(m)]] if id(m) in came else await _stored(
            refs.keep(to_dict(m), inline_bytes))
        for m in kept
    ]  # fmt: skip
    stored = await _stored(refs.store_run(Expanded(forms, [], 0)))
    return _Back([stored], stored)


async def _stored(work: Awaitable[T]) -> T:
    """``work`` on the blob store: a blob the store reports missing where no note can stand
    in for it fails the activity for good; another store failure is tried again."""
    try:
        return await work
    except BlobMissing as exc:
        raise ApplicationError(str(exc), non_retryable=True) from exc


def _rule_data(rule: Rule) -> Json:
    """An "always" rule as workflow data (as :func:`~retinue.policy.rules.rule_for` made
    it: its exact pattern, not its text, which would read wider)."""
    regex = rule._regex  # pyright: ignore[reportPrivateUsage]
    pattern, flags = (regex.pattern, int(regex.flags)) if regex is not None else (None, 0)
    return {"text": rule.text, "tool": rule.tool, "spec": rule.spec, "pattern": pattern,
            "flags": flags}  # fmt: skip


def _rule(data: Json) -> Rule:
    pattern = data.get("pattern")
    regex = re.compile(str(pattern), int(data.get("flags", 0))) if pattern is not None else None
    spec = data.get("spec")
    return Rule(str(data["text"]), str(data["tool"]), None if spec is None else str(spec), regex)


def _descend(ctx: ToolContext, chain: list[list[str]]) -> ToolContext:
    """The context of the agent at the end of ``chain``, below ``ctx``'s main agent."""
    for agent_id, role in chain:
        ctx = ctx.child(agent_id=agent_id, role=role)
    return ctx


async def _beating(work: Awaitable[T]) -> T:
    """Await ``work`` while beating a few times per heartbeat timeout; a cancelled activity
    cancels it."""
    task = asyncio.ensure_future(work)
    timeout = activity.info().heartbeat_timeout
    every = timeout.total_seconds() / 3 if timeout else 10.0
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=every)
            if done:
                return task.result()
            activity.heartbeat()
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
