"""Retinue's roles served over MCP (``retinue mcp serve``), the other way from the client
in :mod:`retinue.mcp`: :mod:`~retinue.mcp.server.serve` builds the server and its tools,
:mod:`~retinue.mcp.server.tasks` and :mod:`~retinue.mcp.server.tasks_2025` turn a long
``SubAgent`` call into a task (the 2026-07-28 extension and the 2025-11-25 core spec), and
:mod:`~retinue.mcp.server.http` binds each session to the token that opened it over HTTP.
It runs a whole runtime, so it is a surface (the layer of :mod:`retinue.server`), while the
client sits where the sub-agent factory can use it. Nothing is imported here.
"""
