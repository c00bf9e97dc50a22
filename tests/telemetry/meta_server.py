"""An MCP server for the tracing tests: its tool says the ``_meta`` its request carried."""

from __future__ import annotations

import json

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("meta")


@server.tool()
def meta(ctx: Context) -> str:
    """The request's _meta, as JSON."""
    found = ctx.request_context.meta or {}
    return json.dumps({k: v for k, v in dict(found).items() if k in ("traceparent", "tracestate")})


if __name__ == "__main__":
    server.run()
