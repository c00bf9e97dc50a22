"""A2A (Agent2Agent v1, through the official ``a2a-sdk``): Retinue's roles served to agents of
other frameworks. :mod:`retinue.a2a.server` publishes one agent card whose skills are the
roles and runs a role when a message comes (blocking or streaming): the message's
``metadata.role`` names the role, and its ``contextId`` is an interactive session of that
role (the same context continues the same history; a message with ``metadata.unload`` ends
the context, which unloads and consolidates the session). A sub-agent's ``AskParent`` is the
task's ``input-required`` state, answered by the next message of the task; cancelling a task
interrupts its turn; the SDK's task store answers ``GetTask`` during and after a run; the
sub-agent tree's events are ``working`` status updates. The package is a surface (layer 6,
like :mod:`retinue.server`); it needs the ``a2a`` extra. :mod:`retinue.llm.a2a` is the
other way: a role file's ``a2a: <url>`` makes a remote A2A agent run that role's sessions, one
context per session, its ``input-required`` the parent's ``[session … asks: …]``; it is a model
adapter, below the sub-agent factory that uses it, and needs approval for a workspace role
file (its old module, ``client`` in this package, is a deprecated alias for one release).
"""
