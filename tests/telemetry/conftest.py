"""Tracing fixtures (the helpers live in ``tracekit``)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tracekit import Traced

from retinue.telemetry import trace as tel

sys.path.insert(0, str(Path(__file__).parents[1] / "subagents"))  # subagent_kit


@pytest.fixture
def traced() -> Iterator[Traced]:
    t = Traced()
    tel.enable(t.provider)
    try:
        yield t
    finally:
        tel.disable()
        t.provider.shutdown()
