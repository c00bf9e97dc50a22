"""What a streamed turn's polls carry on ``retinue serve --temporal``, as conversations grow.

Run: ``uv run --extra temporal python benchmarks/temporal_polls.py``. Writes
``benchmarks/results/temporal_polls.json`` and prints a Markdown section.

One in-process front end (:class:`~retinue.server.temporal_front.TemporalFront`, polling
every 0.2 s) and one in-process worker with a scripted model, on the Temporal dev server.
A conversation gets ``earlier`` turns of 4 kB messages, then one streamed turn of two
1-second tool calls (2 kB results each). A client interceptor records the JSON size of every
query answer the front end receives during that turn (``history_since``, ``approvals``,
``last_turn``): **now**. **Before** is what the front end read until 2026-12-03 for the same
polls: the whole history at the start, at each poll, and once more at the end (computed
from the history's prefixes, not run with the old code).
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import uuid
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

from _common import RESULTS_DIR
from temporal_bench import start_temporal
from temporalio.client import Client, Interceptor, OutboundInterceptor, QueryWorkflowInput

from retinue.config import Settings
from retinue.events import Event
from retinue.runtime import Runtime
from retinue.server.temporal_front import TemporalFront
from retinue.temporal._types import HistoryPage
from retinue.temporal.client import workflow_id
from retinue.temporal.worker import make_worker
from retinue.testing import ScriptedModel, call_tool
from retinue.tools.base import tool

GRID = (10, 40, 100)  # turns before the streamed one


class Sizes(Interceptor):
    """The JSON size of every query answer a client receives, with the query's name."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, Any]] = []

    def intercept_client(self, next: OutboundInterceptor) -> OutboundInterceptor:
        rows = self.rows

        class Logged(OutboundInterceptor):
            async def query_workflow(self, input: QueryWorkflowInput) -> Any:
                answer = await super().query_workflow(input)
                rows.append((input.query, answer))
                return answer

        return Logged(next)


def size(answer: Any) -> int:
    plain = asdict(answer) if is_dataclass(answer) and not isinstance(answer, type) else answer
    return len(json.dumps(plain))


async def one(address: str, root: Path, earlier: int) -> dict[str, int]:
    released = asyncio.Event()

    @tool
    async def slow(n: int) -> str:
        """Take a second."""
        await released.wait()
        released.clear()
        return "r" * 2000

    script: list[Any] = [f"ok {i}" for i in range(earlier)]
    script += [call_tool("slow", {"n": 1}), call_tool("slow", {"n": 2}), "done"]
    model = ScriptedModel(script)
    sizes = Sizes()
    client = await Client.connect(address, interceptors=[sizes])
    queue, cid = f"polls-{uuid.uuid4().hex}", uuid.uuid4().hex[:8]
    front = TemporalFront(client, task_queue=queue)
    home = root / cid
    runtime = Runtime.create(
        Settings(home=home / "home", workspace=home), model=model, model_for=lambda _s: model,
        extra_tools=[slow], with_memory=False, builtins=False,
    )  # fmt: skip
    runtime.compressor.context_window = 10**8  # (no AutoCompress: the history stays whole)

    def sink(event: Event) -> None:
        if event.kind == "tool_started":
            asyncio.get_running_loop().call_later(1.0, released.set)

    async with make_worker(client, runtime, queue):
        for i in range(earlier):
            await front.start("default", cid, f"{i} " + "x" * 4000)
        sizes.rows.clear()
        await front.start("default", cid, "go", on_event=sink)
        rows = list(sizes.rows)
        handle = client.get_workflow_handle(workflow_id("default", cid))
        history = await handle.query("history")
        await handle.terminate()
    pages = [a for q, a in rows if q == "history_since" and isinstance(a, HistoryPage)]
    before = sum(size(history[: p.total]) for p in pages) + size(history)
    return {
        "earlier_turns": earlier,
        "history_bytes": size(history[: pages[0].total]),
        "polls": len(pages) - 1,
        "before_bytes": before,
        "now_bytes": sum(size(a) for _, a in rows),
    }


def markdown(rows: list[dict[str, int]]) -> str:
    lines = [
        "| History before the turn | Polls | Before (whole history per read) | Now |",
        "|---|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['history_bytes'] / 1000:,.0f} kB ({r['earlier_turns']} turns) | {r['polls']} "
            f"| {r['before_bytes'] / 1000:,.0f} kB | {r['now_bytes'] / 1000:,.1f} kB |"
        )
    return "\n".join(lines)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        server, address = start_temporal(root)
        try:
            rows = [asyncio.run(one(address, root, n)) for n in GRID]
        finally:
            server.terminate()
            server.wait()
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    (RESULTS_DIR / "temporal_polls.json").write_text(json.dumps(rows, indent=2) + "\n")
    print(markdown(rows))


if __name__ == "__main__":
    main()
