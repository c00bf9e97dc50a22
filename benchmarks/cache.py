"""Cache-friendliness of an interactive session, Retinue side (issue 7, figure 4).

A 10-turn interactive sub-agent session (the sub-agent calls a tool, then answers, each turn;
its memory renders a timestamp into the system prompt, as a careless runtime would re-render
per request). Every request is serialised with the OpenAI wire conversion ``OpenAIModel``
sends (:func:`retinue.llm.openai.build_request`), and each is compared byte for byte with the
one before: ``kept`` is the share of the previous request's messages that the next one
repeats as its prefix (100% = a provider's prompt cache hits on everything already sent);
``cached`` is that prefix as a share of the new request.

The runner applies :func:`prefix_shares` to the peers' requests as the loopback server
received them, too.

``fork`` (issue 31): a main agent, as a session, works for ``turns`` turns (a Lookup and an
answer each), then delegates to the worker role, once with ``SubAgent(..., fork=true)`` and
once without. For the sub-agent's first request against the main agent's previous request
(the one that asked for the delegation): ``kept`` is the share of that request's messages
the sub-agent's first request repeats as its prefix, ``cached`` that prefix as a share of
the sub-agent's first request, ``tools_same`` whether the tool lists are the same, and
``request_kept`` / ``request_cached`` the same shares over the whole request serialised as one
array, its tools first (as Anthropic and OpenAI put them in the cached prefix).

Run alone: ``uv run python benchmarks/cache.py [--turns 10] [--write]`` (``--write`` puts the
figures into ``results/bench_cache.json``, where the full runner writes them).
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

from _common import RESULTS_DIR, emit_json

from retinue.engine import RunConfig
from retinue.engine.session import Lifecycle, Session
from retinue.llm.base import Model, ToolSpec
from retinue.llm.openai import build_request
from retinue.messages import Message, ToolResultMessage, UserMessage
from retinue.subagents import Role, RoleCatalog, SubAgentManager, subagent_tools
from retinue.testing import ModelCall, ScriptedModel, call_tool
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


DELEGATE = "delegate: "


def delegating_main(fork: bool) -> Any:
    """The main agent's (and its sub-agent's) model: a Lookup and an answer per turn; a turn
    that starts with :data:`DELEGATE` hands the rest to the worker role instead."""

    def respond(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
        last = messages[-1]
        if isinstance(last, UserMessage) and last.content.startswith(DELEGATE):
            task = last.content.removeprefix(DELEGATE)
            return call_tool("SubAgent", {"task": task, "role": "worker", "fork": fork})
        if isinstance(last, ToolResultMessage) and last.name == "SubAgent":
            return "the worker did it"
        return worker(messages, tools)

    return respond


def _wire(call: ModelCall) -> tuple[str, str]:
    """A request's messages, and the whole request with its tools first, as JSON text."""
    body = build_request("x", call.messages, call.tools, stream=False)
    request = json.dumps([*body.get("tools", []), *body["messages"]])  # tools, then messages
    return json.dumps(body["messages"]), request


async def measure_delegation(turns: int, *, fork: bool) -> dict[str, Any]:
    """The sub-agent's first request against the main agent's request before it."""
    model = ScriptedModel(responder=delegating_main(fork))
    worker_role = Role("worker", "answers", "You are the worker.", ("Lookup",),
                       capabilities=frozenset({"memory"}))  # fmt: skip
    manager = SubAgentManager(
        RoleCatalog.of(worker_role), ToolRegistry([lookup]), default_model=model,
        memory=ClockMemory(),
    )  # fmt: skip
    here = Path(os.getcwd())
    ctx = ToolContext("main", here, here, call_chain=("main",), manager=manager)
    tools = ToolRegistry([lookup, *subagent_tools()])

    async def prompt() -> str:
        return "You are the main agent. Look things up, then answer."

    main = Session("main", RunConfig(model, [], tools, ctx), Lifecycle(system_prompt=prompt))
    async with manager.owner("main"):
        for t in range(turns):
            await main.send(f"question {t}: what about part {t}?")
        await main.send(f"{DELEGATE}summarise what we found about parts 0 to {turns - 1}")
    at = next(i for i, c in enumerate(model.calls) if c.messages[-1].content.startswith(DELEGATE))
    (parent, parent_request), (child, child_request) = map(_wire, model.calls[at : at + 2])
    messages, request = (
        prefix_shares([parent, child]),
        prefix_shares([parent_request, child_request]),
    )
    return {
        "parent_messages": len(model.calls[at].messages),
        "kept": messages["kept_min"],
        "cached": messages["cached_last"],
        "tools_same": model.calls[at].tools == model.calls[at + 1].tools,
        "request_kept": request["kept_min"],
        "request_cached": request["cached_last"],
    }


async def measure_fork(turns: int = 10) -> dict[str, Any]:
    """Fork against plain delegation, after ``turns`` turns of the main agent."""
    return {
        "turns": turns,
        "fork": await measure_delegation(turns, fork=True),
        "plain": await measure_delegation(turns, fork=False),
    }


async def measure_all(turns: int) -> dict[str, Any]:
    return {**await measure(turns), "fork": await measure_fork(turns)}


def write(figures: dict[str, Any], path: Path = RESULTS_DIR / "bench_cache.json") -> None:
    """Put ``figures`` in the results file as its ``cache`` entry (the rest stays)."""
    data = json.loads(path.read_text()) if path.exists() else {}
    data["cache"] = {**figures, "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    path.write_text(json.dumps(data, indent=2) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description="Retinue cache-prefix share")
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--write", action="store_true", help="into results/bench_cache.json")
    args = parser.parse_args()
    figures = asyncio.run(measure_all(args.turns))
    if args.write:
        write(figures)
    emit_json(figures)


if __name__ == "__main__":
    main()
