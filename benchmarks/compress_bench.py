"""Tokens sent per turn over a long interactive session, with and without AutoCompress.

A scripted interactive sub-agent session (one stored history, ``engine.run`` per turn, the
way the sub-agent manager drives it): every turn the parent sends a ~100-token message; on
two turns in three the agent reads a ~1,200-token tool result first; it answers in ~150
tokens. The same session runs twice: with an :class:`AutoCompressor` on a small window, and
with no context keeper (the window is not enforced there, so the growth shows). In the
compressed run the scripted model refuses any request over the window, so a compression
that failed to keep the session inside it would show up as an error.

Run: ``uv run python benchmarks/compress_bench.py [--quick] [--turns N] [--window N]``.
Writes ``benchmarks/results/compress.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from retinue.engine import RunConfig, run
from retinue.engine.compress import AutoCompressor
from retinue.errors import ContextTooLongError
from retinue.events import COMPRESSED, Event
from retinue.llm.base import ToolSpec
from retinue.llm.tokens import estimate_tokens
from retinue.messages import AssistantMessage, Message, SystemMessage, UserMessage
from retinue.testing import ScriptedModel, call_tool
from retinue.tools.base import ToolContext, ToolRegistry, tool

RESULTS = Path(__file__).parent / "results" / "compress.json"
SYSTEM = "You are a code-review sub-agent. " + "Follow the house rules carefully. " * 35
SUMMARY = "## Task\n- review the module\n## Facts learned\n" + "- a fact worth keeping\n" * 60


@tool()
def read_file(ctx: ToolContext, path: str) -> str:
    """Read a file of the project."""
    return f"# {path}\n" + "def function(argument):\n    return argument * 2\n" * 100


def responder(window: int | None) -> Callable[[Sequence[Message], Sequence[ToolSpec]], Any]:
    """The scripted agent; refuses requests over ``window`` like a real provider would."""

    def answer(msgs: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
        if window is not None and estimate_tokens(msgs) > window:
            return ContextTooLongError(f"request of {estimate_tokens(msgs)} tokens > {window}")
        if msgs[0].content.startswith("You compress the earlier part"):
            return SUMMARY
        last = msgs[-1]
        if isinstance(last, UserMessage) and "please read" in last.content:
            return call_tool("read_file", {"path": f"src/module_{len(msgs)}.py"})
        return AssistantMessage("Reviewed: " + "the code looks reasonable overall. " * 17)

    return answer


async def session(turns: int, keeper: AutoCompressor | None, window: int) -> dict[str, Any]:
    """Run one session; per turn: tokens sent (agent and summary calls), history size."""
    model = ScriptedModel(responder=responder(window if keeper else None))
    events: list[Event] = []
    tmp = Path(tempfile.gettempdir())
    ctx = ToolContext(agent_id="bench", workspace=tmp, data_dir=tmp, events=events.append)
    stored: list[Message] = [SystemMessage(SYSTEM)]
    per_turn: list[dict[str, int]] = []
    started = time.perf_counter()
    for turn in range(turns):
        ask = "please read the next file and " if turn % 3 else ""
        stored.append(UserMessage(f"Turn {turn}: {ask}" + "check the error handling. " * 15))
        cfg = RunConfig(
            model, stored, ToolRegistry([read_file]), ctx, interactive=True, context_keeper=keeper
        )
        await run(cfg)
        sizes = [estimate_tokens(c.messages) for c in model.calls]
        summary = [s for s, c in zip(sizes, model.calls, strict=True) if c.tools == ()]
        per_turn.append(
            {
                "turn": turn + 1,
                "sent_tokens": sum(sizes),
                "summary_call_tokens": sum(summary),
                "largest_request": max(sizes),
                "history_tokens": estimate_tokens(stored),
            }
        )
        model.calls.clear()
    seconds = time.perf_counter() - started
    compressions = [e.data for e in events if e.kind == COMPRESSED]
    return {
        "total_sent_tokens": sum(t["sent_tokens"] for t in per_turn),
        "peak_request_tokens": max(t["largest_request"] for t in per_turn),
        "final_history_tokens": per_turn[-1]["history_tokens"],
        "compressions": len([c for c in compressions if c["ok"]]),
        "failed_compressions": len([c for c in compressions if not c["ok"]]),
        "over_window_turns": [t["turn"] for t in per_turn if t["largest_request"] > window],
        "seconds": round(seconds, 4),
        "per_turn": per_turn,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description="AutoCompress token benchmark")
    parser.add_argument("--quick", action="store_true", help="12 turns, for CI")
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--window", type=int, default=16_000)
    parser.add_argument("--reserve", type=int, default=2_000)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    turns, window = (12, 6_000) if args.quick else (args.turns, args.window)
    keeper = AutoCompressor(context_window=window, output_reserve=args.reserve)
    with_c = await session(turns, keeper, window)
    without = await session(turns, None, window)
    result = {
        "benchmark": "compress",
        "quick": args.quick,
        "turns": turns,
        "context_window": window,
        "output_reserve": args.reserve,
        "threshold": keeper.threshold,
        "python": platform.python_version(),
        "tokens_sent_ratio": round(with_c["total_sent_tokens"] / without["total_sent_tokens"], 3),
        "with_compression": with_c,
        "without_compression": without,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    for name, r in (("with", with_c), ("without", without)):
        print(
            f"{name:>7} compression: {r['total_sent_tokens']:>9} tokens sent over {turns} turns, "
            f"peak request {r['peak_request_tokens']}, final history "
            f"{r['final_history_tokens']}, compressions {r['compressions']}, "
            f"turns over the {window}-token window: {len(r['over_window_turns'])}"
        )
    print(f"tokens sent with/without: {result['tokens_sent_ratio']}  -> {args.out}")


if __name__ == "__main__":
    asyncio.run(main())
