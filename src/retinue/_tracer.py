"""Where a run tracer is installed: :data:`current`, None while tracing is off.

The engine declares what a tracer does (:class:`retinue.engine.observer.RunTracer`: spans for
a turn, a model call, a step's tool calls, a compression, and events on the current span) and
reads this slot before each of those hooks: one ``is None`` test, no call, while tracing is
off. :mod:`retinue.telemetry.trace` implements the protocol and installs its tracer here when
tracing is enabled (and takes it away when it is disabled). The slot sits in the lowest layer
so that neither side imports the other: telemetry stays below the engine, and the engine does
not depend on the OpenTelemetry module.
"""

from __future__ import annotations

from typing import Any

__all__ = ["current"]

current: Any = None
"""The installed tracer (a :class:`~retinue.engine.observer.RunTracer`), or None: read it
into a local annotated ``RunTracer | None`` (this module cannot name the engine's type)."""
