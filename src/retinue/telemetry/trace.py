"""OpenTelemetry GenAI spans for turns, model calls, tool calls, memory and compression.

Follows ``open-telemetry/semantic-conventions-genai`` **v0.1.0** (its first standalone
release; status Development, so names may still change): ``invoke_agent {role}`` per turn
of every session, ``chat {model}`` per model call, ``execute_tool {tool}`` per tool call,
with ``gen_ai.operation.name``, ``gen_ai.provider.name``, ``gen_ai.request.model``,
``gen_ai.usage.input_tokens`` / ``output_tokens``, ``gen_ai.agent.name`` / ``.id``,
``gen_ai.conversation.id``, ``gen_ai.tool.name`` / ``.call.id``; Retinue's own figures are
``retinue.*`` (cost, depth, interactive). Prompts and completions (``gen_ai.input.messages``
/ ``gen_ai.output.messages``) are recorded only with content capture on.

The engine does not import this module: :class:`Tracer` implements the engine's
:class:`~retinue.engine.observer.RunTracer` protocol (turns, model calls, tool calls,
compressions, events), and :func:`enable` (or :func:`setup`, from the settings) installs it in
:mod:`retinue._tracer`, where the engine looks before each hook; :func:`disable` takes it
away. Off, that costs the engine one ``is None`` test per hook and no span objects; the code
that calls this module directly (memory tools, consolidation, sub-agent limits) checks
:data:`ENABLED` first, as cheaply. ``opentelemetry`` is imported only by :func:`enable`.
Spans follow OpenTelemetry's own context (a contextvar): a session's turn task copies the
context when it is created, so a sub-agent's turn, background or not, is a child of the
parent's ``SubAgent`` tool span that started it.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from retinue import _tracer as _slot
from retinue.messages import Usage, to_dict
from retinue.telemetry.prices import cost_usd

if TYPE_CHECKING:
    from retinue.messages import Message, ToolCall, ToolResultMessage

__all__ = [
    "ENABLED",
    "SEMCONV_VERSION",
    "TRACER",
    "RemoteParent",
    "Tracer",
    "Turn",
    "annotate",
    "begin_chat",
    "begin_turn",
    "disable",
    "enable",
    "end_chat",
    "event",
    "inject",
    "setup",
    "span",
    "traced",
    "traced_calls",
    "with_remote_parent",
]

P = ParamSpec("P")
R = TypeVar("R")

SEMCONV_VERSION = "semantic-conventions-genai v0.1.0"
ENABLED = False  # read before every hook by the code that calls here: a plain module attribute
_CAPTURE = False  # gen_ai.input.messages / gen_ai.output.messages (off by default)
_MAX_CONTENT = 64_000  # characters of captured content per attribute
_tracer: Any = None
_provider: Any = None  # the TracerProvider setup() made (shut down by disable())


def enable(tracer_provider: Any = None, *, capture_content: bool = False) -> None:
    """Trace from now on, with ``tracer_provider`` (default: OpenTelemetry's global one)."""
    global ENABLED, _CAPTURE, _tracer
    from opentelemetry import trace

    provider = tracer_provider or trace.get_tracer_provider()
    _tracer = provider.get_tracer("retinue", schema_url=None)
    _CAPTURE = capture_content
    ENABLED = True
    _slot.current = TRACER  # the engine traces its runs from now on


def disable() -> None:
    """Stop tracing (spans already open still end); flushes a provider :func:`setup` made."""
    global ENABLED, _tracer, _provider
    ENABLED = False
    _slot.current = None
    _tracer = None
    if _provider is not None:
        _provider.shutdown()
        _provider = None


def setup(endpoint: str | None = None, *, capture_content: bool = False) -> bool:
    """Export spans over OTLP/HTTP (protobuf) when ``endpoint`` (Retinue's ``otel_endpoint``)
    or ``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set and the
    ``otel`` extra is installed. True if tracing is on. Idempotent."""
    global _provider
    if ENABLED:
        return True
    env = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    )
    if not (endpoint or env):
        return False
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        logging.getLogger("retinue.telemetry").warning(
            "an OTLP endpoint is set but the 'otel' extra is not installed "
            "(pip install 'retinue[otel]'); tracing stays off"
        )
        return False
    traces_url = None
    if not env and endpoint:  # Retinue's setting: the base URL, as the env variable is
        traces_url = endpoint.rstrip("/") + "/v1/traces"
    name = os.environ.get("OTEL_SERVICE_NAME") or "retinue"
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=traces_url)))
    _provider = provider
    from opentelemetry import trace

    trace.set_tracer_provider(provider)  # the MCP SDK's client spans join the same export
    enable(provider, capture_content=capture_content)
    return True


# -- turns (invoke_agent) ------------------------------------------------------------------


class Turn:
    """The ``invoke_agent`` span of one turn, current while the turn runs (its task's own
    context): ended once, with an error status unless :meth:`ok` was called."""

    __slots__ = ("_done", "_span", "_token", "model")

    def __init__(self, span: Any, token: object, model: str) -> None:
        self._span, self._token, self._done, self.model = span, token, False, model

    def ok(self, usage: Usage, content: str, stop_reason: str) -> None:
        span = self._span
        _usage_attributes(span, self.model, usage)
        span.set_attribute("retinue.stop_reason", stop_reason)
        if _CAPTURE:
            span.set_attribute(
                "gen_ai.output.messages", _json([{"role": "assistant", "content": content}])
            )
        self._done = True

    def fail(self, reason: str, usage: Usage | None = None) -> None:
        if usage is not None:
            _usage_attributes(self._span, self.model, usage)
        _error(self._span, reason)
        self._done = True

    def end(self) -> None:
        from opentelemetry import context

        if not self._done:
            _error(self._span, _current_error() or "ended without an answer")
        self._span.end()
        context.detach(self._token)  # pyright: ignore[reportArgumentType]


def begin_turn(
    *,
    session_id: str,
    agent_id: str,
    role: str,
    depth: int,
    interactive: bool,
    model: str,
    text: str | None,
) -> Turn:
    """Start the ``invoke_agent`` span of a turn and make it current (call in the turn's
    task); the caller must :meth:`Turn.end` it in a ``finally``."""
    from opentelemetry import context, trace

    provider, _, _ = model.partition(":")
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": role,
        "gen_ai.agent.id": agent_id,
        "gen_ai.conversation.id": session_id,
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": model,
        "retinue.agent.depth": depth,
        "retinue.session.interactive": interactive,
    }
    if _CAPTURE and text is not None:
        attributes["gen_ai.input.messages"] = _json([{"role": "user", "content": text}])
    span = _tracer.start_span(
        f"invoke_agent {role}", kind=trace.SpanKind.INTERNAL, attributes=attributes
    )
    token = context.attach(trace.set_span_in_context(span))
    return Turn(span, token, model)


# -- model calls (chat) --------------------------------------------------------------------


def begin_chat(model: str, messages: Sequence[Message]) -> Any:
    """Start a ``chat`` span (a child of the current span; not made current)."""
    from opentelemetry import trace

    provider, _, name = model.partition(":")
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": name or model,
    }
    if _CAPTURE:
        attributes["gen_ai.input.messages"] = _json([to_dict(m) for m in messages])
    return _tracer.start_span(
        f"chat {name or model}", kind=trace.SpanKind.CLIENT, attributes=attributes
    )


def end_chat(span: Any, model: str, usage: Usage | None, output: Message | None = None) -> None:
    """End a ``chat`` span: with its usage, or (``usage`` None) with an error status."""
    if usage is None:
        _error(span, _current_error() or "no response")
    else:
        _usage_attributes(span, model, usage)
        if _CAPTURE and output is not None:
            span.set_attribute("gen_ai.output.messages", _json([to_dict(output)]))
    span.end()


# -- tool calls (execute_tool) -------------------------------------------------------------


async def traced_calls(
    calls: Sequence[ToolCall],
    run_one: Callable[[ToolCall], Awaitable[list[ToolResultMessage]]],
) -> list[ToolResultMessage]:
    """Run ``calls`` in parallel, each as ``run_one((call,))`` would, inside an
    ``execute_tool`` span that is current while it runs (so a sub-agent it starts is its
    child)."""
    import asyncio

    if len(calls) == 1:
        return await _one_call(calls[0], run_one)
    done = await asyncio.gather(*(_one_call(c, run_one) for c in calls))
    return [r for results in done for r in results]


async def _one_call(
    call: ToolCall, run_one: Callable[[ToolCall], Awaitable[list[ToolResultMessage]]]
) -> list[ToolResultMessage]:
    from opentelemetry import trace

    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.name,
        "gen_ai.tool.call.id": call.id,
        "gen_ai.tool.type": "function",
    }
    if _CAPTURE:
        attributes["gen_ai.tool.call.arguments"] = call.arguments[:_MAX_CONTENT]
    with _tracer.start_as_current_span(
        f"execute_tool {call.name}",
        kind=trace.SpanKind.INTERNAL,
        attributes=attributes,
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        try:
            results = await run_one(call)
        except BaseException as exc:
            _error(span, _describe(exc))
            raise
        if any(r.is_error for r in results):
            _error(span, "tool_error")
        if _CAPTURE and results:
            span.set_attribute("gen_ai.tool.call.result", results[0].content[:_MAX_CONTENT])
        return results


# -- anything else: memory operations, compression ----------------------------------------


@contextmanager
def span(name: str, **attributes: Any) -> Iterator[Any]:
    """A span named ``name`` around a block, current inside it; nothing when tracing is off
    (yields None). An exception (cancellation included) ends it with an error status."""
    if not ENABLED:
        yield None
        return
    with _tracer.start_as_current_span(
        name,
        attributes={k: v for k, v in attributes.items() if v is not None},
        record_exception=False,
        set_status_on_exception=False,
    ) as current:
        try:
            yield current
        except BaseException as exc:
            _error(current, _describe(exc))
            raise


def traced(name: str) -> Callable[[Callable[P, Awaitable[R]]], Callable[P, Awaitable[R]]]:
    """Decorate a coroutine function that runs rarely (compression): a span ``name`` around
    each call while tracing is on, with its ``str`` / ``int`` / ``bool`` keyword arguments
    as ``retinue.<name>`` attributes. Tracing off, one flag check per call."""

    def wrap(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
        @functools.wraps(fn)
        async def call(*args: P.args, **kwargs: P.kwargs) -> R:
            if not ENABLED:
                return await fn(*args, **kwargs)
            simple = {
                f"retinue.{k}": v for k, v in kwargs.items() if isinstance(v, str | int | bool)
            }
            with span(name, **simple):
                return await fn(*args, **kwargs)

        return call

    return wrap


def annotate(**attributes: Any) -> None:
    """Set attributes on the current span (a limit a ``SubAgent`` call reached); nothing
    when tracing is off."""
    if not ENABLED:
        return
    from opentelemetry import trace

    found = {k: v for k, v in attributes.items() if v is not None}
    trace.get_current_span().set_attributes(found)


def event(name: str, **attributes: Any) -> None:
    """An event on the current span (steering shown to a turn's model)."""
    from opentelemetry import trace

    trace.get_current_span().add_event(name, attributes)


# -- the engine's tracer ------------------------------------------------------------------


class _ModelCall:
    """A ``chat`` span as the engine's :class:`~retinue.engine.observer.ModelCallSpan`."""

    __slots__ = ("_model", "_span")

    def __init__(self, span: Any, model: str) -> None:
        self._span, self._model = span, model

    def end(self, usage: Usage | None, output: Message | None = None) -> None:
        end_chat(self._span, self._model, usage, output)


class Tracer:
    """This module as the engine's :class:`~retinue.engine.observer.RunTracer`: what
    :func:`enable` installs in :mod:`retinue._tracer` (:data:`TRACER`, the one instance)."""

    __slots__ = ()

    begin_turn = staticmethod(begin_turn)
    tool_calls = staticmethod(traced_calls)
    event = staticmethod(event)

    def begin_model_call(self, model: str, messages: Sequence[Message]) -> _ModelCall:
        return _ModelCall(begin_chat(model, messages), model)

    def compress(self, *, hard: bool, reason: str) -> AbstractContextManager[Any]:
        return span("compress", **{"retinue.hard": hard, "retinue.reason": reason})


TRACER = Tracer()


# -- across processes ----------------------------------------------------------------------


def inject(carrier: dict[str, Any]) -> dict[str, Any]:
    """Add the current trace context (``traceparent``, ``tracestate``) to ``carrier`` (an MCP
    request's ``_meta``, HTTP headers); nothing when tracing is off."""
    if ENABLED:
        from opentelemetry import propagate

        propagate.inject(carrier)
    return carrier


@contextmanager
def with_remote_parent(headers: Any) -> Iterator[None]:
    """Make the trace context in ``headers`` (``traceparent``) the current parent for the
    block: the turns started in it join the caller's trace. Nothing when tracing is off or
    no valid ``traceparent`` came."""
    if not ENABLED or not headers or "traceparent" not in headers:
        yield
        return
    from opentelemetry import context, propagate

    carrier = {k: str(headers[k])[:512] for k in ("traceparent", "tracestate") if k in headers}
    token = context.attach(propagate.extract(carrier))
    try:
        yield
    finally:
        context.detach(token)


class RemoteParent:
    """ASGI middleware: an HTTP request that carries ``traceparent`` runs with that context
    as its parent, so the turns it starts (``retinue serve``) join the caller's trace. Tracing
    off, or no header: the request goes through untouched."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if not ENABLED or scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        headers = {
            k.decode("latin-1"): v.decode("latin-1")
            for k, v in scope.get("headers", ())
            if k in (b"traceparent", b"tracestate")
        }
        with with_remote_parent(headers):
            await self.app(scope, receive, send)


# -- helpers -------------------------------------------------------------------------------


def _usage_attributes(span: Any, model: str, usage: Usage) -> None:
    span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
    span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
    if usage.cache_read_tokens:
        span.set_attribute("gen_ai.usage.cache_read.input_tokens", usage.cache_read_tokens)
    cost = cost_usd(model, usage)
    if cost is not None:  # unknown stays absent, never 0
        span.set_attribute("retinue.cost_usd", cost)


def _error(span: Any, reason: str) -> None:
    from opentelemetry.trace import Status, StatusCode

    span.set_attribute("error.type", reason.partition(":")[0][:100])
    span.set_status(Status(StatusCode.ERROR, reason[:500]))


def _describe(exc: BaseException) -> str:
    import asyncio

    if isinstance(exc, asyncio.CancelledError):
        return "cancelled"
    return f"{type(exc).__name__}: {exc}"


def _current_error() -> str | None:
    exc = sys.exc_info()[1]
    return _describe(exc) if exc is not None else None


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)[:_MAX_CONTENT]
