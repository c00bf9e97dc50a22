"""Engine overhead per model round trip, Retinue side (issue 7, figures 1a and 1b).

(a) in process: :class:`ScriptedModel` answers at once; (b) over loopback HTTP: an
:class:`OpenAIModel` talks to the :class:`LoopbackOpenAIServer` the runner started (the same one
the peers use). The scenario is in ``_common`` (``GRID``: 100 and 10 turns, and 10 turns after
a seeded history of 10 or 200 messages). With ``--refs`` it also times the references on the
same server: a bare ``http.client`` loop posting ready bodies (the floor), the ``openai`` SDK's
``client.post`` with a ready body, and its ``chat.completions.create``.

Run alone: ``uv run python benchmarks/overhead.py [--base-url URL] [--repeats N] [--refs]``
(without ``--base-url`` it starts its own server). Prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import time
from collections.abc import Sequence
from importlib.metadata import version
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from _common import FINAL, GRID, SYSTEM, TOOL_NAME, emit_json, history_texts, median, task_text
from _common import wanted_turns as _wanted

from retinue.engine import RunConfig, run
from retinue.llm.base import Model, ModelResponse, ToolSpec
from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.llm.openai import OpenAIModel, build_request
from retinue.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from retinue.testing import ScriptedModel, call_tool
from retinue.tools import ToolContext, ToolRegistry, tool

USAGE = Usage(100, 10, 0, 1)


@tool(TOOL_NAME)
def noop(ctx: ToolContext) -> str:
    """Do nothing."""
    return "ok"


def loopback_responder(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
    """Stateless: call ``noop`` until the user's ``turns`` are used up, then answer.

    The answer carries its own usage figure, as a provider's does, so the fake does not
    estimate tokens over the whole history on every call (that estimate is the fake's cost,
    O(history), and would be charged to the engine).
    """
    done = 0
    for m in reversed(messages):
        if isinstance(m, UserMessage):
            more = done < _wanted(m.content) - 1
            message = call_tool(TOOL_NAME, {}) if more else AssistantMessage(FINAL)
            return ModelResponse(message, USAGE, "tool_calls" if more else "stop")
        if isinstance(m, ToolResultMessage):
            done += 1
    return ModelResponse(AssistantMessage(FINAL), USAGE, "stop")


def start_server() -> LoopbackOpenAIServer:
    """The shared loopback server: answers at once, keeps connections alive, records nothing
    the runner does not clear."""
    return LoopbackOpenAIServer(ScriptedModel(responder=loopback_responder, record=False)).start()


def seeded(history: int, task: str) -> list[Message]:
    out: list[Message] = [SystemMessage(SYSTEM)]
    for role, text in history_texts(history):
        out.append(UserMessage(text) if role == "user" else AssistantMessage(text))
    out.append(UserMessage(task))
    return out


def inproc_model() -> ScriptedModel:
    """Retinue's own fake: stateless like the server, so one instance serves every run."""
    return ScriptedModel(responder=loopback_responder, record=False)


async def time_run(model: Model, turns: int, history: int, run_no: int) -> float:
    """Per-turn milliseconds of one run."""
    ctx = ToolContext("bench", Path.cwd(), Path.cwd())
    config = RunConfig(
        model,
        seeded(history, task_text(turns, history, run_no)),
        ToolRegistry([noop]),
        ctx,
        max_iterations=turns + 5,
    )
    started = time.perf_counter()
    out = await run(config)
    elapsed = (time.perf_counter() - started) * 1000
    if out.iterations != turns or out.content != FINAL:
        raise RuntimeError(f"retinue run went wrong: {out.iterations} turns, {out.content!r}")
    return elapsed / turns


async def measure(model: Model, repeats: int, grid: dict[str, tuple[int, int]]) -> dict[str, float]:
    out = {}
    for label, (turns, history) in grid.items():
        await time_run(model, turns, history, -1)  # warm-up
        out[label] = median([await time_run(model, turns, history, k) for k in range(repeats)])
    return out


# -- references on the same server ------------------------------------------------------------


def ready_bodies(turns: int, history: int) -> list[dict[str, Any]]:
    """The request bodies Retinue would send for one run, built beforehand."""
    messages = seeded(history, task_text(turns, history, 0))
    bodies = []
    for k in range(turns):
        bodies.append(build_request("bench", messages, [noop.spec], stream=False))
        call = ToolCall(f"call_{k}", TOOL_NAME, "{}")
        messages = [
            *messages,
            AssistantMessage("", (call,)),
            ToolResultMessage(call.id, "noop", "ok"),
        ]
    return bodies


def floor_http_client(base_url: str, bodies: list[bytes]) -> float:
    """Per-request ms of a bare keep-alive ``http.client`` loop posting ready bytes."""
    parts = urlsplit(base_url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port)
    path = parts.path.rstrip("/") + "/chat/completions"
    headers = {"Content-Type": "application/json"}
    started = time.perf_counter()
    for body in bodies:
        conn.request("POST", path, body, headers)
        resp = conn.getresponse()
        resp.read()
        if resp.status != 200:
            raise RuntimeError(f"loopback server answered {resp.status}")
    elapsed = (time.perf_counter() - started) * 1000
    conn.close()
    return elapsed / len(bodies)


async def sdk_refs(base_url: str, bodies: list[dict[str, Any]]) -> tuple[float, float]:
    """Per-request ms of the ``openai`` SDK: ``client.post`` with a ready body, and
    ``chat.completions.create``."""
    import openai
    from openai.types.chat import ChatCompletion

    client = openai.AsyncOpenAI(base_url=base_url, api_key="bench")
    await client.post("/chat/completions", body=bodies[0], cast_to=ChatCompletion)
    started = time.perf_counter()
    for body in bodies:
        await client.post("/chat/completions", body=body, cast_to=ChatCompletion)
    post = (time.perf_counter() - started) * 1000 / len(bodies)
    started = time.perf_counter()
    for body in bodies:
        await client.chat.completions.create(
            model=body["model"], messages=body["messages"], tools=body["tools"]
        )
    create = (time.perf_counter() - started) * 1000 / len(bodies)
    await client.close()
    return post, create


async def references(base_url: str, repeats: int) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {"http_client": {}, "sdk_post": {}, "sdk_create": {}}
    for label, (turns, history) in GRID.items():
        dicts = ready_bodies(turns, history)
        raw = [json.dumps(b).encode() for b in dicts]
        floor_http_client(base_url, raw)  # warm-up
        out["http_client"][label] = median(
            [floor_http_client(base_url, raw) for _ in range(repeats)]
        )
        runs = [await sdk_refs(base_url, dicts) for _ in range(max(1, repeats // 2))]
        out["sdk_post"][label] = median([r[0] for r in runs])
        out["sdk_create"][label] = median([r[1] for r in runs])
    return out


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    grid = {k: GRID[k] for k in args.grid.split(",")}
    server = None if args.base_url else start_server()
    base_url = args.base_url or (server.base_url if server else "")
    try:
        result: dict[str, Any] = {"framework": "retinue", "version": version("retinue")}
        if "inproc" in args.variants:
            result["inproc"] = await measure(inproc_model(), args.repeats, grid)
        if "loopback" in args.variants:
            model = OpenAIModel("bench", base_url=base_url, api_key="bench")
            result["loopback"] = await measure(model, args.repeats, grid)
        if args.refs:
            result["refs"] = await references(base_url, args.repeats)
        return result
    finally:
        if server is not None:
            server.close()


def main() -> None:
    parser = argparse.ArgumentParser(description="Retinue engine overhead per model round trip")
    parser.add_argument("--base-url", default="", help="a running loopback server (/v1)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--grid", default=",".join(GRID))
    parser.add_argument("--variants", default="inproc,loopback")
    parser.add_argument("--refs", action="store_true", help="also time the references")
    emit_json(asyncio.run(main_async(parser.parse_args())))


if __name__ == "__main__":
    main()
