"""MCP both ways: tools from MCP servers for Retinue's agents (:mod:`retinue.mcp.servers`,
what a definition says, which role files use too; :mod:`retinue.mcp.config`, where servers
are configured and which may start; :mod:`retinue.mcp.client`; :mod:`retinue.mcp.tools`),
and Retinue's roles served to other agents (:mod:`retinue.mcp.server.serve`).

Nothing is imported here, so that reading role files does not load the MCP SDK.
"""
