"""``retinue serve --temporal ADDRESS``: the HTTP service as a stateless front end over
conversations that run as Temporal workflows (:mod:`retinue.server.temporal_front`).

It builds no runtime (no model, no tools: the workers have those); it reads the settings
for the data directory (its token) and the tenant, connects to the Temporal server and serves
until stopped. Given the memory store the workers use (the settings' ``database_url``, else
the data directory's SQLite, as ``retinue serve`` opens it), it serves the transcripts the
workers keep and shows content kept by reference whole. Needs the ``temporal`` extra.
"""

from __future__ import annotations

import asyncio
import socket
from typing import TYPE_CHECKING

import typer

from retinue.cli.common import EXIT_INTERRUPTED, one_line_errors

if TYPE_CHECKING:
    from retinue.cli.worker import TemporalTarget
    from retinue.memory import MemoryBackend
    from retinue.server.security import Security

__all__ = ["serve_temporal"]

# ``--max-turns`` bounds one tenant's turns in flight; the front end holds this many tenants'
# worth at once, every tenant's together
TENANTS_AT_FULL = 4


def serve_temporal(
    target: TemporalTarget,
    *,
    max_turns: int,
    tenant: str,
    sock: socket.socket,
    security: Security,
    tracing: tuple[str | None, bool] = (None, False),
    memory: MemoryBackend | None = None,
) -> None:
    """Serve on ``sock`` until stopped (the process then exits without the interpreter's
    teardown: see :func:`retinue.cli.worker._leave`). ``max_turns`` bounds each tenant's
    turns in flight; the front end's bound is ``TENANTS_AT_FULL`` times that. ``tracing``:
    the settings' ``otel_endpoint`` and ``otel_capture_content`` (an endpoint, here or in
    ``OTEL_EXPORTER_OTLP_ENDPOINT``, turns tracing on, as in a worker). ``memory``: the
    workers' store (None: no transcripts, stubs shown as their notes)."""
    import uvicorn

    from retinue.cli.worker import _leave
    from retinue.server.temporal_front import TemporalFront, create_temporal_app
    from retinue.telemetry.trace import setup
    from retinue.temporal.worker import connect

    setup(tracing[0], capture_content=tracing[1])

    async def main() -> None:
        with one_line_errors():
            client = await connect(target.address, target.namespace)
        front = TemporalFront(
            client, tenant=tenant, task_queue=target.task_queue,
            max_tenant_turns=max_turns, max_turns=TENANTS_AT_FULL * max_turns,
            blobs=memory.blobs if memory is not None else None,
            transcripts=memory.transcripts if memory is not None else None,
        )  # fmt: skip
        app = create_temporal_app(front, security)
        config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=5)
        await uvicorn.Server(config).serve(sockets=[sock])

    code = 0
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    except typer.Exit as exc:  # one_line_errors' exit
        code = exc.exit_code
    _leave(code)
