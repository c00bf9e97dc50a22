"""Cache-friendliness of an interactive session, Retinue side (issue 7, figure 4).

A 10-turn interactive sub-agent session (the sub-agent calls a tool, then answers, each turn;
its memory renders a timestamp into the system prompt, as a careless runtime would re-render
per request). Every request is serialised with the OpenAI wire conversion ``OpenAIModel``
sends (:func:`retinue.llm.openai.build_request`), and each is compared byte for byte with the
one before: ``kept`` is the share of the previous request's messages that the next one
repeats as its prefix (100% = a provider's prompt cache hits on everything already sent);
``cached`` is that prefix as a share of the new request.

The runner applies :func:`prefix_shares` to the peers' requests as the loopback server
received them, too. Run alone: ``uv run python benchmarks/cache.py [--turns 10]``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _common import emit_json

from retinue.llm.base import Model, ToolSpec
from retinue.llm.openai import build_request
from retinue.messages import Message, ToolResultMessage, UserMessage
from retinue.subagents import Role, RoleCatalog, SubAgentManager
from retinue.testing import ScriptedModel, call_tool
from retinue.tools import ToolContext, ToolRegistry, tool


@tool("Lookup")
def lookup(ctx: ToolContext, query: str) -> str:
    """Look something up."""
    return f"result for {query}: nothing surprising"


class ClockMemory:
    """A memory whose rendering changes every call (it shows the time)."""

    async def render(self, tenant: str, role: str) -> str:
        return f"## Memory of {role}\nRendered at {time.time_ns()}."

    async def consolidate(
        self, *, tenant: str, role: str, session_id: str, messages: Sequence[Message], model: Model
    ) -> bool:
        return True


def worker(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
    if isinstance(messages[-1], UserMessage):
        return call_tool("Lookup", {"query": messages[-1].content[:20]})
    assert isinstance(messages[-1], ToolResultMessage)
    return f"answer after {len(messages)} messages"


def common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # binary search on the first difference
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def prefix_shares(serialised: Sequence[str]) -> dict[str, Any]:
    """Per consecutive pair of serialised message lists (JSON arrays): kept and cached shares."""
    kept, cached = [], []
    for prev, cur in itertools.pairwise(serialised):
        body = prev.rstrip("]")  # the closing bracket of the previous array is not content
        same = min(common_prefix(prev, cur), len(body))
        kept.append(same / max(1, len(body)))
        cached.append(same / max(1, len(cur)))
    return {
        "requests": len(serialised),
        "kept_min": min(kept, default=1.0),
        "kept_mean": sum(kept) / max(1, len(kept)),
        "cached_mean": sum(cached) / max(1, len(cached)),
        "cached_last": cached[-1] if cached else 0.0,
    }


async def measure(turns: int = 10) -> dict[str, Any]:
    model = ScriptedModel(responder=worker)
    manager = SubAgentManager(
        RoleCatalog.of(
            Role("worker", "answers", "You are the worker.", capabilities=frozenset({"memory"}))
        ),
        ToolRegistry([lookup]),
        default_model=model,
        memory=ClockMemory(),
    )
    ctx = ToolContext(
        "main", Path(os.getcwd()), Path(os.getcwd()), call_chain=("main",), manager=manager
    )
    for t in range(turns):
        await manager.interactive_subagent(ctx, f"question {t}: what about part {t}?", "worker")
    await manager.cleanup("main")
    wire = [
        json.dumps(build_request("x", call.messages, call.tools, stream=False)["messages"])
        for call in model.calls
    ]
    return {"framework": "retinue", "turns": turns, **prefix_shares(wire)}


def main() -> None:
    parser = argparse.ArgumentParser(description="Retinue cache-prefix share")
    parser.add_argument("--turns", type=int, default=10)
    emit_json(asyncio.run(measure(parser.parse_args().turns)))


if __name__ == "__main__":
    main()
