"""MCP both ways: tools from MCP servers for Retinue's agents (:mod:`retinue.mcp.config`,
:mod:`retinue.mcp.client`, :mod:`retinue.mcp.tools`), and Retinue's roles served to other
agents (:mod:`retinue.mcp.serve`).

Nothing is imported here, so that reading role files does not load the MCP SDK.
"""
