"""Tracing test helpers: an SDK TracerProvider with the in-memory exporter, and a processor
that knows which spans were started and never ended."""

from __future__ import annotations

from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

__all__ = ["OpenSpans", "Traced"]


class OpenSpans(SpanProcessor):
    """The spans started and not ended yet, by span id."""

    def __init__(self) -> None:
        self.open: dict[int, str] = {}

    def on_start(self, span: Span, parent_context: object = None) -> None:
        if span.context is not None:
            self.open[span.context.span_id] = span.name

    def on_end(self, span: ReadableSpan) -> None:
        assert span.context is not None
        self.open.pop(span.context.span_id, None)


class Traced:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.open = OpenSpans()
        self.provider = TracerProvider()
        self.provider.add_span_processor(self.open)
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())
