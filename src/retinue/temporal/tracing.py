"""One trace per user message across a Temporal front end, its workflows and their activities.

:class:`TracingInterceptor`, on a Temporal client (and so on the workers built on it: see
:func:`~retinue.temporal.worker.connect` and :func:`~retinue.temporal.worker.make_worker`),
carries OpenTelemetry's trace context (``traceparent``) in Temporal's ``_tracer-data``
header, the header and format of ``temporalio.contrib.opentelemetry``: from the caller of an
Update or a signal (the front end's ``retinue.message`` span) into the workflow, and from
the workflow into the activities and child workflows it starts and the signals it sends (a
message to a sub-agent session). A turn (the ``send`` Update, the ``deliver`` signal of a
session) runs in an ``invoke_agent {role}`` span made in the workflow, a child of its
caller's span; the activities' model calls and tool calls (:func:`chat`, :func:`tool_call`)
are ``chat`` and ``execute_tool`` spans under it, and a sub-agent's turn is a child of the
turn that sent it the message. Each Update and signal runs in the context it came with:
Temporal's own ``TracingInterceptor`` parents everything in a workflow on the workflow's
start, which would put every turn of a conversation into its first message's trace.

The workflow's spans are replay-safe: their ids come from the workflow's deterministic
random (``TemporalIdGenerator``), so a turn a worker replays (it died, or dropped the
workflow from its cache) makes the span it made the first time, with the same id, and ends
it once; a span replayed to its end is not exported again. Nothing here changes what a
workflow does (headers and spans only), and nothing happens while tracing is off.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import opentelemetry.context
from opentelemetry import propagate, trace
from temporalio import client, workflow
from temporalio.converter import PayloadConverter
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    HandleSignalInput,
    HandleUpdateInput,
    Interceptor,
    SignalChildWorkflowInput,
    SignalExternalWorkflowInput,
    StartActivityInput,
    StartChildWorkflowInput,
    StartLocalActivityInput,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
    WorkflowOutboundInterceptor,
)

from retinue.telemetry import trace as _tel
from retinue.temporal._types import Agent, TurnReply
from retinue.temporal.workflow import ConversationWorkflow

if TYPE_CHECKING:
    from temporalio.api.common.v1 import Payload

    from retinue.llm.base import ModelResponse
    from retinue.messages import Message, ToolCall, ToolResultMessage

__all__ = ["HEADER", "TURNS", "TracingInterceptor", "chat", "tool_call"]

HEADER = "_tracer-data"  # (temporalio.contrib.opentelemetry's: its interceptors read ours)
TURNS = frozenset({"send", "deliver"})  # the Update and the signal that run a turn
_MAX_FIELD = 512  # characters of a traceparent / tracestate read from a header


class TracingInterceptor(client.Interceptor, Interceptor):
    """Carry the trace context through a client's calls and a worker's workflows and
    activities; make each turn's ``invoke_agent`` span in the workflow. Its spans go to
    ``tracer_provider`` (default: OpenTelemetry's global one, where ``otel_endpoint``
    puts Retinue's)."""

    def __init__(self, tracer_provider: Any = None) -> None:
        self._provider = tracer_provider
        self._tracer: Any = None

    def intercept_client(self, next: client.OutboundInterceptor) -> client.OutboundInterceptor:
        return _ClientOut(next)

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _ActivityIn(next)

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor]:
        root = self
        if _tel.ENABLED:  # (made here, outside the workflow sandbox, when it can be)
            self.workflow_tracer()

        class Bound(_WorkflowIn):
            tracing = root

        return Bound

    def workflow_tracer(self) -> Any:
        """The tracer of the workflows' spans, its span ids the workflow's deterministic
        ones (made once, when a workflow first needs it)."""
        if self._tracer is None:
            provider = self._provider or trace.get_tracer_provider()
            self._tracer = _deterministic(provider.get_tracer("retinue.temporal"))
        return self._tracer


def _deterministic(tracer: Any) -> Any:
    """``tracer`` (the OpenTelemetry SDK's) drawing its span ids from the workflow's
    deterministic random inside a workflow, from its own generator outside."""
    try:
        from opentelemetry.sdk.trace import Tracer

        # (public in temporalio, not re-exported: the generator of its replay-safe provider)
        from temporalio.contrib.opentelemetry._id_generator import TemporalIdGenerator
    except ImportError:  # (no SDK: not a tracer whose ids can be chosen)
        return tracer
    if isinstance(tracer, Tracer) and not isinstance(tracer.id_generator, TemporalIdGenerator):
        tracer.id_generator = TemporalIdGenerator(tracer.id_generator)
    return tracer


# -- the context in headers ----------------------------------------------------------------


def _with_context(headers: Mapping[str, Payload]) -> Mapping[str, Payload]:
    """``headers`` with the current trace context added (unchanged when tracing is off or
    no span is current)."""
    if not _tel.ENABLED:
        return headers
    carrier = _tel.inject({})
    if not carrier:
        return headers
    return {**headers, HEADER: PayloadConverter.default.to_payloads([carrier])[0]}


def _context_of(headers: Mapping[str, Payload]) -> opentelemetry.context.Context | None:
    """The trace context ``headers`` carry; None when tracing is off or they carry none."""
    if not _tel.ENABLED or HEADER not in headers:
        return None
    try:
        carrier = PayloadConverter.default.from_payloads([headers[HEADER]])[0]
    except Exception:  # (not ours: a header we cannot read carries nothing)
        return None
    if not isinstance(carrier, dict):
        return None
    fields = {
        k: str(carrier[k])[:_MAX_FIELD] for k in ("traceparent", "tracestate") if k in carrier
    }
    return propagate.extract(fields) if "traceparent" in fields else None


@contextlib.contextmanager
def _attached(context: opentelemetry.context.Context | None) -> Iterator[None]:
    """``context`` current for the block (nothing when None)."""
    if context is None:
        yield
        return
    token = opentelemetry.context.attach(context)
    try:
        yield
    finally:
        # (a workflow a worker dropped is finalised in another context: nothing to undo)
        with contextlib.suppress(ValueError):
            token.var.reset(token)


# -- the client ----------------------------------------------------------------------------


class _ClientOut(client.OutboundInterceptor):
    async def start_workflow(self, input: client.StartWorkflowInput) -> Any:
        input.headers = _with_context(input.headers)
        return await super().start_workflow(input)

    async def start_workflow_update(self, input: client.StartWorkflowUpdateInput) -> Any:
        input.headers = _with_context(input.headers)
        return await super().start_workflow_update(input)

    async def start_update_with_start_workflow(
        self, input: client.StartWorkflowUpdateWithStartInput
    ) -> Any:
        start, update = input.start_workflow_input, input.update_workflow_input
        start.headers = _with_context(start.headers)
        update.headers = _with_context(update.headers)
        return await super().start_update_with_start_workflow(input)

    async def signal_workflow(self, input: client.SignalWorkflowInput) -> None:
        input.headers = _with_context(input.headers)
        await super().signal_workflow(input)


# -- activities ----------------------------------------------------------------------------


class _ActivityIn(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        with _attached(_context_of(input.headers)):
            return await super().execute_activity(input)


async def chat(
    model: str, sent: Sequence[Message], work: Awaitable[ModelResponse]
) -> ModelResponse:
    """Await a model call ``work`` (of ``model`` on ``sent``) in a ``chat`` span, ended
    with its usage, or with an error status if it fails."""
    if not _tel.ENABLED:
        return await work
    span = _tel.begin_chat(model, sent)
    try:
        response = await work
    except BaseException:
        _tel.end_chat(span, model, None)
        raise
    _tel.end_chat(span, model, response.usage, response.message)
    return response


async def tool_call(call: ToolCall, work: Awaitable[ToolResultMessage]) -> ToolResultMessage:
    """Await a tool call ``work`` in an ``execute_tool`` span, current while it runs."""
    if not _tel.ENABLED:
        return await work

    async def run(_call: ToolCall) -> list[ToolResultMessage]:
        return [await work]

    return (await _tel.traced_calls([call], run))[0]


# -- workflows -----------------------------------------------------------------------------


class _WorkflowIn(WorkflowInboundInterceptor):
    tracing: TracingInterceptor

    def init(self, outbound: WorkflowOutboundInterceptor) -> None:
        super().init(_WorkflowOut(outbound))

    async def handle_signal(self, input: HandleSignalInput) -> None:
        with _attached(_context_of(input.headers)), self._turn(input.signal):
            await super().handle_signal(input)

    async def handle_update_handler(self, input: HandleUpdateInput) -> Any:
        with _attached(_context_of(input.headers)), self._turn(input.update) as span:
            reply = await super().handle_update_handler(input)
            if span is not None and isinstance(reply, TurnReply):
                span.set_attribute("retinue.stop_reason", reply.stop_reason)
            return reply

    @contextlib.contextmanager
    def _turn(self, handler: str) -> Iterator[Any]:
        """An ``invoke_agent`` span around a turn's handler (None: not a turn, or tracing is
        off), current while it runs; ended when it ends, but not while replaying (it was
        exported then) nor when the worker drops the workflow (the one that replays it ends
        it)."""
        if handler not in TURNS or not _tel.ENABLED:
            yield None
            return
        replaying = workflow.unsafe.is_replaying_history_events()
        span = self.tracing.workflow_tracer().start_span(
            f"invoke_agent {_role()}",
            kind=trace.SpanKind.INTERNAL,
            attributes=_turn_attributes(),
            start_time=workflow.time_ns() if replaying else None,
        )
        token = opentelemetry.context.attach(trace.set_span_in_context(span))
        evicted = False
        try:
            yield span
        except GeneratorExit:
            evicted = True
            raise
        except BaseException as exc:
            span.set_attribute("error.type", type(exc).__name__)
            span.set_status(trace.Status(trace.StatusCode.ERROR, str(exc)[:500]))
            raise
        finally:
            with contextlib.suppress(ValueError):
                token.var.reset(token)
            if not evicted and not workflow.unsafe.is_replaying_history_events():
                span.end()


def _agent() -> Agent | None:
    instance = workflow.instance()
    return instance.agent if isinstance(instance, ConversationWorkflow) else None


def _role() -> str:
    agent = _agent()
    return agent.role if agent is not None else "main"


def _turn_attributes() -> dict[str, Any]:
    agent, info = _agent(), workflow.info()
    found: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "temporal.workflow.id": info.workflow_id,
        "temporal.run.id": info.run_id,
    }
    if agent is not None:
        found |= {
            "gen_ai.agent.name": agent.role,
            "gen_ai.agent.id": agent.agent_id,
            "retinue.agent.depth": len(agent.chain),
            "retinue.session.interactive": not agent.one_shot,
        }
    return found


class _WorkflowOut(WorkflowOutboundInterceptor):
    def start_activity(self, input: StartActivityInput) -> workflow.ActivityHandle[Any]:
        input.headers = _with_context(input.headers)
        return super().start_activity(input)

    def start_local_activity(self, input: StartLocalActivityInput) -> workflow.ActivityHandle[Any]:
        input.headers = _with_context(input.headers)
        return super().start_local_activity(input)

    async def start_child_workflow(
        self, input: StartChildWorkflowInput
    ) -> workflow.ChildWorkflowHandle[Any, Any]:
        input.headers = _with_context(input.headers)
        return await super().start_child_workflow(input)

    async def signal_child_workflow(self, input: SignalChildWorkflowInput) -> None:
        input.headers = _with_context(input.headers)
        await super().signal_child_workflow(input)

    async def signal_external_workflow(self, input: SignalExternalWorkflowInput) -> None:
        input.headers = _with_context(input.headers)
        await super().signal_external_workflow(input)
