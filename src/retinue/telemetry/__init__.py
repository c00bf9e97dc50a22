"""Telemetry: OpenTelemetry GenAI traces and what the model calls cost. :mod:`.trace` makes
the spans (following ``open-telemetry/semantic-conventions-genai`` v0.1.0, status
Development) as the engine's declared tracer (``engine.observer.RunTracer``), which
:func:`.trace.enable` installs in ``retinue._tracer`` for the engine to find; it exports them
over OTLP/HTTP when an endpoint is set and the ``otel`` extra is installed, and carries the
trace context into MCP calls and out of service requests;
:mod:`.prices` holds the price table per model and turns a session's token usage into US
dollars (unknown, never zero, for a model without a price). Nothing here imports
``opentelemetry`` at import time, and nothing here imports the engine: it sits in layer 2.
"""
