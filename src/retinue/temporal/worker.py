"""A Temporal worker for Retinue's conversation workflows and their activities.

:func:`make_worker` registers :class:`~retinue.temporal.workflow.ConversationWorkflow` and a
runtime's :class:`~retinue.temporal.activities.TurnActivities` on a task queue; Retinue's own
modules pass through the workflow sandbox (they are imported once, outside it: the workflow
code that uses them, :mod:`retinue.messages`, is pure). :func:`run_worker` connects and runs
one until it is cancelled, sweeping the store the workers share every hour beside it (old
blobs and transcripts: :mod:`retinue.temporal.sweep`; a program that runs
:func:`make_worker` itself runs ``Sweep.of(runtime).forever()`` beside it). The client
:func:`connect` makes, and any worker :func:`make_worker` builds, carry the trace context
(:class:`~retinue.temporal.tracing.TracingInterceptor`): while
tracing is on, one user message is one trace across front end, workflows and activities.
"""

from __future__ import annotations

import asyncio

from temporalio.client import Client
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from retinue.errors import ConfigError
from retinue.runtime import Runtime
from retinue.temporal.activities import TurnActivities
from retinue.temporal.sweep import SWEEP_EVERY, Sweep
from retinue.temporal.tracing import TracingInterceptor
from retinue.temporal.workflow import ConversationWorkflow

__all__ = [
    "DEFAULT_NAMESPACE",
    "DEFAULT_TASK_QUEUE",
    "connect",
    "make_worker",
    "run_worker",
    "workflow_runner",
]

DEFAULT_NAMESPACE = "default"
DEFAULT_TASK_QUEUE = "retinue"


async def connect(address: str, namespace: str = DEFAULT_NAMESPACE) -> Client:
    """A client of the Temporal server at ``address`` (``host:port``); one that cannot be
    reached is a :class:`~retinue.errors.ConfigError` naming it."""
    try:
        return await Client.connect(
            address, namespace=namespace, interceptors=[TracingInterceptor()]
        )
    except RuntimeError as exc:  # (the SDK's connection failure)
        raise ConfigError(f"cannot reach the Temporal server at {address!r}: {exc}") from exc


def workflow_runner() -> SandboxedWorkflowRunner:
    """The sandbox the workflows run in (a replay of their histories needs the same)."""
    return SandboxedWorkflowRunner(  # (opentelemetry's context is one, in and out)
        restrictions=SandboxRestrictions.default.with_passthrough_modules(
            "retinue", "opentelemetry"
        )
    )


def make_worker(client: Client, runtime: Runtime, task_queue: str = DEFAULT_TASK_QUEUE) -> Worker:
    """A worker of ``task_queue`` on ``runtime``; it carries the trace context (the
    client's :class:`~retinue.temporal.tracing.TracingInterceptor`, else one of its own)."""
    traced = any(isinstance(i, TracingInterceptor) for i in client.config()["interceptors"])
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[ConversationWorkflow],
        activities=TurnActivities(runtime).activities(),
        workflow_runner=workflow_runner(),
        interceptors=[] if traced else [TracingInterceptor()],
    )


async def run_worker(
    address: str,
    runtime: Runtime,
    *,
    namespace: str = DEFAULT_NAMESPACE,
    task_queue: str = DEFAULT_TASK_QUEUE,
    sweep_every: float = SWEEP_EVERY,
) -> None:
    """Connect to the Temporal server at ``address`` and work until cancelled, sweeping
    the store every ``sweep_every`` seconds (the sweep ends with the worker)."""
    client = await connect(address, namespace)
    worker = make_worker(client, runtime, task_queue)
    async with asyncio.TaskGroup() as tasks:
        sweeping = tasks.create_task(Sweep.of(runtime).forever(sweep_every))
        try:
            await worker.run()
        finally:
            sweeping.cancel()
