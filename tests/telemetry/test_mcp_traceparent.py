"""Trace context into MCP calls: the request's ``_meta`` carries a ``traceparent`` naming the
calling ``execute_tool`` span (MCP 2026-07-28; the MCP SDK injects the current context)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from opentelemetry import trace as otel_trace
from tracekit import Traced

from retinue.mcp.client import McpServer
from retinue.mcp.servers import StdioServer
from retinue.messages import ToolCall, ToolResultMessage
from retinue.telemetry import trace as tel
from retinue.testing import call_tool

pytestmark = pytest.mark.timeout(60)

SERVER = Path(__file__).with_name("meta_server.py")


async def test_an_mcp_call_carries_the_tool_spans_traceparent(
    tmp_path: Path, traced: Traced
) -> None:
    server = McpServer(
        "meta", StdioServer(command=sys.executable, args=[str(SERVER)]), cwd=tmp_path, log_dir=None
    )
    try:
        call = call_tool("mcp__meta__meta", {}, id="c1").tool_calls[0]

        async def one(c: ToolCall) -> list[ToolResultMessage]:
            result = await server.call("meta", {})
            text = result.content[0].text  # type: ignore[union-attr]
            return [ToolResultMessage(c.id, c.name, text)]

        (result,) = await tel.traced_calls((call,), one)
    finally:
        await server.close()
    seen = json.loads(result.content)
    (span,) = [s for s in traced.spans() if s.name == "execute_tool mcp__meta__meta"]
    assert span.context is not None
    trace_id, span_id = f"{span.context.trace_id:032x}", f"{span.context.span_id:016x}"
    version, sent_trace, parent, _flags = seen["traceparent"].split("-")
    assert version == "00" and sent_trace == trace_id
    # the MCP SDK's own client span sits between once a global SDK provider is set (as
    # setup() does, in another test of this process); until then the parent is the tool span
    if isinstance(otel_trace.get_tracer_provider(), otel_trace.ProxyTracerProvider):
        assert parent == span_id
