"""The policy layer: what may run, decided between the engine and the tools.

Every tool call a model asks for passes one gate before it runs, at any depth: the permission
mode (Claude Code's ``default``, ``acceptEdits``, ``plan``, ``dontAsk``,
``bypassPermissions``), the allow / ask / deny rules in Claude Code's syntax (from
``.claude/settings*.json`` and Retinue's config), the user's ``PreToolUse`` / ``PostToolUse``
hooks, and, where the answer is "ask", an approval from whoever holds the top of the session
tree (the terminal, the web page, an HTTP client, an MCP client or a library callback); the
calling turn waits in place. The same layer decides whether a command that a workspace file
defines (``.mcp.json``, a role's ``mcpServers``, a project hook) may start at all: only a
definition the user approved, by its hash, kept in the data directory the sandbox hides.
Nothing here imports the engine, the sub-agents or a surface; they call into it.
"""
