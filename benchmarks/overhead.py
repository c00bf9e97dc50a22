"""Engine overhead per model round trip, Retinue side (issue 7, figures 1a and 1b).

(a) in process: :class:`ScriptedModel` answers at once; (b) over loopback HTTP: an
:class:`OpenAIModel` talks to the :class:`LoopbackOpenAIServer` the runner started (the same one
the peers use). The scenario is in ``_common`` (``GRID``: 100 and 10 turns, and 10 turns after
a seeded history of 10 or 200 messages). With ``--refs`` it also times the floor, a bare
``http.client`` loop posting the same bodies ready-encoded, alternated run by run with the
loopback runs (``--pairs`` of each, so both see the same moment of a shared machine; the
floor ratio is the median of the pairs' ratios), and with ``--sdk-refs`` the ``openai``
SDK's ``client.post`` with a ready body and its ``chat.completions.create``. Every figure is a
(wall, CPU) pair of milliseconds per turn; CPU is this process's (all threads), so the server
must live elsewhere (the runner's process) for the CPU figures to be the client's alone.

Run alone: ``uv run python benchmarks/overhead.py [--base-url URL] [--repeats N] [--refs]``
(without ``--base-url`` it starts its own server, in this process: CPU figures then include
the server's work). Prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import threading
import time
from collections.abc import Sequence
from importlib.metadata import version
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from _common import (
    FINAL,
    GRID,
    SYSTEM,
    TOOL_NAME,
    emit_json,
    history_texts,
    median_pair,
    task_text,
    timed,
)
from _common import wanted_turns as _wanted

from retinue.engine import RunConfig, run
from retinue.llm.base import Model, ModelResponse, ToolSpec
from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.llm.openai import OpenAIModel, build_request
from retinue.llm.openai_responses import OpenAIResponsesModel
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
# grid points for Retinue and the floor only (the peers' cost grows with the history: a
# 400-turn run of theirs would take minutes per round)
LONG_GRID: dict[str, tuple[int, int]] = {"t400": (400, 0)}
ALL_GRID = {**GRID, **LONG_GRID}
Pair = dict[str, float]


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


async def time_run(model: Model, turns: int, history: int, run_no: int) -> tuple[float, float]:
    """Per-turn (wall, CPU) milliseconds of one run; the seeded history is built beforehand."""
    ctx = ToolContext("bench", Path.cwd(), Path.cwd())
    config = RunConfig(
        model,
        seeded(history, task_text(turns, history, run_no)),
        ToolRegistry([noop]),
        ctx,
        max_iterations=turns + 5,
        repeat_limit=None,  # the scenario's no-op call is the same every turn, by design
    )
    out, wall, cpu = await timed(run(config))
    if out.iterations != turns or out.content != FINAL:
        raise RuntimeError(f"retinue run went wrong: {out.iterations} turns, {out.content!r}")
    return wall / turns, cpu / turns


async def measure(model: Model, repeats: int, grid: dict[str, tuple[int, int]]) -> dict[str, Pair]:
    out = {}
    for label, (turns, history) in grid.items():
        await time_run(model, turns, history, -1)  # warm-up
        out[label] = median_pair([await time_run(model, turns, history, k) for k in range(repeats)])
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


def floor_http_client(base_url: str, bodies: list[bytes]) -> tuple[float, float]:
    """Per-request (wall, CPU) ms of a bare keep-alive ``http.client`` loop posting ready
    bytes: the floor the server allows."""
    parts = urlsplit(base_url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port)
    path = parts.path.rstrip("/") + "/chat/completions"
    headers = {"Content-Type": "application/json"}
    wall, cpu = time.perf_counter(), time.process_time()
    for body in bodies:
        conn.request("POST", path, body, headers)
        resp = conn.getresponse()
        resp.read()
        if resp.status != 200:
            raise RuntimeError(f"loopback server answered {resp.status}")
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    conn.close()
    return wall * 1000 / len(bodies), cpu * 1000 / len(bodies)


async def sdk_refs(
    base_url: str, bodies: list[dict[str, Any]], create: bool
) -> tuple[tuple[float, float], tuple[float, float]]:
    """Per-request (wall, CPU) ms of the ``openai`` SDK: ``client.post`` with a ready body, and
    ``chat.completions.create`` (``(nan, nan)`` unless ``create``)."""
    import openai
    from openai.types.chat import ChatCompletion

    client = openai.AsyncOpenAI(base_url=base_url, api_key="bench")
    await client.post("/chat/completions", body=bodies[0], cast_to=ChatCompletion)

    async def posts() -> None:
        for body in bodies:
            await client.post("/chat/completions", body=body, cast_to=ChatCompletion)

    async def creates() -> None:
        for body in bodies:
            await client.chat.completions.create(
                model=body["model"], messages=body["messages"], tools=body["tools"]
            )

    n = len(bodies)
    _, wall, cpu = await timed(posts())
    post = (wall / n, cpu / n)
    made = (float("nan"), float("nan"))
    if create:
        _, wall, cpu = await timed(creates())
        made = (wall / n, cpu / n)
    await client.close()
    return post, made


async def paired(
    model: Model, base_url: str, pairs: int, grid: dict[str, tuple[int, int]]
) -> tuple[dict[str, Pair], dict[str, Pair], dict[str, dict[str, list[float]]]]:
    """Retinue over loopback and the floor, alternated on every grid point.

    Each pair is one Retinue run and one floor run back to back (which goes first alternates),
    so both see the same moment of a shared machine; the ratio of a pair is Retinue's per-turn
    time over the floor's per-request time. Returns Retinue's median (wall, CPU), the floor's,
    and every pair's ratios.
    """
    mine: dict[str, Pair] = {}
    floor: dict[str, Pair] = {}
    ratios: dict[str, dict[str, list[float]]] = {}
    for label, (turns, history) in grid.items():
        raw = [json.dumps(b).encode() for b in ready_bodies(turns, history)]
        await time_run(model, turns, history, -1)  # warm-up, both
        floor_http_client(base_url, raw)
        runs: list[tuple[float, float]] = []
        refs: list[tuple[float, float]] = []
        for k in range(pairs):
            if k % 2:
                refs.append(floor_http_client(base_url, raw))
                runs.append(await time_run(model, turns, history, k))
            else:
                runs.append(await time_run(model, turns, history, k))
                refs.append(floor_http_client(base_url, raw))
        mine[label], floor[label] = median_pair(runs), median_pair(refs)
        ratios[label] = {
            m: [r[i] / f[i] for r, f in zip(runs, refs, strict=True)]
            for i, m in enumerate(("wall", "cpu"))
        }
    return mine, floor, ratios


async def sdk_references(
    base_url: str, grid: dict[str, tuple[int, int]]
) -> dict[str, dict[str, Pair]]:
    """The SDK's two paths on every grid point but the long one (``chat.completions.create``
    is slow there)."""
    out: dict[str, dict[str, Pair]] = {"sdk_post": {}, "sdk_create": {}}
    for label, (turns, history) in grid.items():
        if label in LONG_GRID:
            continue
        post, made = await sdk_refs(base_url, ready_bodies(turns, history), create=True)
        out["sdk_post"][label] = median_pair([post])
        out["sdk_create"][label] = median_pair([made])
    return out


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    grid = {k: ALL_GRID[k] for k in args.grid.split(",")}
    server = None if args.base_url else start_server()
    base_url = args.base_url or (server.base_url if server else "")
    try:
        result: dict[str, Any] = {"framework": "retinue", "version": version("retinue")}
        if "inproc" in args.variants:
            result["inproc"] = await measure(inproc_model(), args.repeats, grid)
        model = OpenAIModel("bench", base_url=base_url, api_key="bench")
        if args.refs:  # Retinue over loopback alternated with the floor
            pairs = max(args.pairs, args.repeats)
            mine, floor, ratios = await paired(model, base_url, pairs, grid)
            result["loopback"], result["floor_pairs"] = mine, ratios
            result["refs"] = {"http_client": floor}
            if args.sdk_refs:
                result["refs"].update(await sdk_references(base_url, grid))
        elif "loopback" in args.variants:
            result["loopback"] = await measure(model, args.repeats, grid)
        if "responses" in args.variants and args.responses_url:
            responses = OpenAIResponsesModel("bench", base_url=args.responses_url, api_key="bench")
            result["responses"] = await measure(responses, args.repeats, grid)
        return result
    finally:
        if server is not None:
            server.close()


def main() -> None:
    parser = argparse.ArgumentParser(description="Retinue engine overhead per model round trip")
    parser.add_argument("--base-url", default="", help="a running loopback server (/v1)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--grid", default=",".join(GRID), help=f"of {', '.join(ALL_GRID)}")
    parser.add_argument("--variants", default="inproc,loopback")
    parser.add_argument("--responses-url", default="", help="a loopback /v1/responses server")
    parser.add_argument(
        "--refs", action="store_true", help="also time the floor, alternated with the loopback runs"
    )
    parser.add_argument(
        "--pairs", type=int, default=7, help="with --refs: (Retinue, floor) pairs per grid point"
    )
    parser.add_argument("--sdk-refs", action="store_true", help="and the SDK's two paths")
    parser.add_argument("--serve", action="store_true", help="only run the server (Ctrl-C)")
    args = parser.parse_args()
    if args.serve:
        server = start_server()
        print(server.base_url, flush=True)
        try:
            threading.Event().wait()
        finally:
            server.close()
    emit_json(asyncio.run(main_async(args)))


if __name__ == "__main__":
    main()
