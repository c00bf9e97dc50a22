"""Tokens sent per turn over a long interactive session: no keeper, summaries only, and
context editing first (clear old tool results and thinking, then summarise if still needed).

A scripted interactive sub-agent session (one stored history, ``engine.run`` per turn, the
way the sub-agent manager drives it): every turn the parent sends a ~100-token message; on
two turns in three the agent reads a ~1,200-token tool result first; it answers in ~150
tokens. The same session runs three times: with no context keeper (the window is not
enforced there, so the growth shows), with an :class:`AutoCompressor` that only summarises
(``edit=None``), and with the default one (context editing, then the summary). With a keeper
the scripted model refuses any request over the window, so a keeper that failed to keep the
session inside it would show up as an error.

Measured per arm: tokens sent (agent and summary requests), model calls (summary calls
apart), and the *cache prefix share*: of the tokens each agent request sends, the share that
repeats the previous agent request from its start (what a provider's prompt cache can read);
a clearing or a summary rewrites the history after its first change, so it costs that share.

Run: ``uv run python benchmarks/compress_bench.py [--quick] [--turns N] [--window N]``.
Writes ``benchmarks/results/compress.json``, the Markdown fragment ``results/compress.md``,
and (full runs) that section of ``benchmarks/RESULTS.md``.
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


def _prefix_tokens(now: Sequence[Message], before: Sequence[Message]) -> int:
    """Tokens of the longest run of messages ``now`` shares with ``before`` from the start."""
    n = 0
    while n < min(len(now), len(before)) and now[n] == before[n]:
        n += 1
    return estimate_tokens(now[:n])


async def session(turns: int, keeper: AutoCompressor | None, window: int) -> dict[str, Any]:
    """Run one session; per turn: tokens sent (agent and summary calls), history size."""
    model = ScriptedModel(responder=responder(window if keeper else None))
    events: list[Event] = []
    tmp = Path(tempfile.gettempdir())
    ctx = ToolContext(agent_id="bench", workspace=tmp, data_dir=tmp, events=events.append)
    stored: list[Message] = [SystemMessage(SYSTEM)]
    per_turn: list[dict[str, int]] = []
    previous: Sequence[Message] = ()
    calls = summaries = cached = agent_sent = 0
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
        for size, call in zip(sizes, model.calls, strict=True):
            if call.tools:  # an agent request: how much of it repeats the previous one
                cached += _prefix_tokens(call.messages, previous)
                agent_sent += size
                previous = call.messages
        calls += len(model.calls)
        summaries += len(summary)
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
    done = [e.data for e in events if e.kind == COMPRESSED]
    return {
        "total_sent_tokens": sum(t["sent_tokens"] for t in per_turn),
        "model_calls": calls,
        "summary_calls": summaries,
        "cache_prefix_share": round(cached / agent_sent, 3) if agent_sent else 0.0,
        "uncached_tokens": sum(t["sent_tokens"] for t in per_turn) - cached,
        "peak_request_tokens": max(t["largest_request"] for t in per_turn),
        "final_history_tokens": per_turn[-1]["history_tokens"],
        "compressions": len([c for c in done if c["ok"] and c["reason"] != "context_edit"]),
        "context_edits": len([c for c in done if c["ok"] and c["reason"] == "context_edit"]),
        "failed_compressions": len([c for c in done if not c["ok"]]),
        "over_window_turns": [t["turn"] for t in per_turn if t["largest_request"] > window],
        "seconds": round(seconds, 4),
        "per_turn": per_turn,
    }


ARMS = {
    "none": "no context keeper",
    "summary": "summaries only (`edit=None`)",
    "edit": "context editing, then summaries (default)",
}


def fragment(result: dict[str, Any]) -> str:
    """The Markdown section of RESULTS.md for ``result``."""
    arms = result["arms"]
    rows = [
        f"| {ARMS[name]} | {r['total_sent_tokens']:,} | {r['model_calls']} | "
        f"{r['summary_calls']} | {r['context_edits']} | {r['cache_prefix_share']:.1%} | "
        f"{r['uncached_tokens']:,} | {r['peak_request_tokens']:,} | {len(r['over_window_turns'])} |"
        for name, r in arms.items()
    ]
    edit, summary = arms["edit"], arms["summary"]
    saved = summary["total_sent_tokens"] - edit["total_sent_tokens"]
    share = saved / summary["total_sent_tokens"]
    uncached = 1 - edit["uncached_tokens"] / summary["uncached_tokens"]
    return "\n".join(
        [
            "## Context editing before compression (issue 44)",
            "",
            f"One interactive session of {result['turns']} turns (a ~1,200-token tool result on "
            f"two turns in three), a {result['context_window']:,}-token window, scripted model; "
            "`benchmarks/compress_bench.py`. Cache prefix share: of the tokens each agent "
            "request sends, the share that repeats the previous request from its start.",
            "",
            "| keeper | tokens sent | model calls | summary calls | clearings "
            "| cache prefix share | uncached tokens | peak request | turns over the window |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
            *rows,
            "",
            f"Clearing first saved {saved:,} tokens sent ({share:.0%}) and "
            f"{summary['model_calls'] - edit['model_calls']} model calls against summaries only; "
            f"the cache prefix share went from {summary['cache_prefix_share']:.1%} to "
            f"{edit['cache_prefix_share']:.1%}, and the tokens not read from a cache (summary "
            f"requests included) fell by {uncached:.0%}.",
            "",
        ]
    )


def write_section(results_md: Path, text: str) -> None:
    """Replace (or append) this benchmark's section of ``results_md``."""
    heading = text.splitlines()[0]
    old = results_md.read_text() if results_md.exists() else ""
    if heading in old:
        before, _, rest = old.partition(heading)
        nxt = rest.find("\n## ")
        after = rest[nxt + 1 :] if nxt >= 0 else ""
        new = before + text + ("\n" + after if after else "")
    else:
        anchor = "\n## Other benchmarks in this folder"
        at = old.find(anchor)
        new = old[: at + 1] + text + old[at:] if at >= 0 else old.rstrip() + "\n\n" + text
    results_md.write_text(new)


async def main() -> None:
    parser = argparse.ArgumentParser(description="AutoCompress token benchmark")
    parser.add_argument("--quick", action="store_true", help="12 turns, for CI")
    parser.add_argument("--turns", type=int, default=150)
    parser.add_argument("--window", type=int, default=64_000)
    parser.add_argument("--reserve", type=int, default=2_000)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    turns, window = (12, 6_000) if args.quick else (args.turns, args.window)

    def keeper(**options: Any) -> AutoCompressor:
        return AutoCompressor(context_window=window, output_reserve=args.reserve, **options)

    arms = {
        "none": await session(turns, None, window),
        "summary": await session(turns, keeper(edit=None), window),
        "edit": await session(turns, keeper(), window),
    }
    default = keeper()
    assert default.edit is not None
    without = arms["none"]["total_sent_tokens"]
    result = {
        "benchmark": "compress",
        "quick": args.quick,
        "turns": turns,
        "context_window": window,
        "output_reserve": args.reserve,
        "threshold": default.threshold,
        "edit_trigger": default.edit.trigger,
        "edit_keep_tool_results": default.edit.keep_tool_results,
        "python": platform.python_version(),
        "tokens_sent_ratio": round(arms["edit"]["total_sent_tokens"] / without, 3),
        "summary_only_tokens_sent_ratio": round(arms["summary"]["total_sent_tokens"] / without, 3),
        "arms": arms,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    text = fragment(result)
    if not args.quick and args.out == RESULTS:
        (RESULTS.parent / "compress.md").write_text(text)
        write_section(Path(__file__).parent / "RESULTS.md", text)
    for name, r in arms.items():
        print(
            f"{name:>7}: {r['total_sent_tokens']:>9} tokens sent over {turns} turns, "
            f"{r['model_calls']} calls ({r['summary_calls']} summaries), "
            f"{r['context_edits']} clearings, cache prefix share {r['cache_prefix_share']:.1%}, "
            f"peak request {r['peak_request_tokens']}, "
            f"turns over the {window}-token window: {len(r['over_window_turns'])}"
        )
    print(f"tokens sent with/without: {result['tokens_sent_ratio']}  -> {args.out}")


if __name__ == "__main__":
    asyncio.run(main())
