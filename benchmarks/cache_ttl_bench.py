"""An idle interactive session's first request after a pause: cache reads with Anthropic's
default 5-minute prompt cache and with the 1-hour one (``cache_ttl = "1h"``).

One interactive session through Retinue's Anthropic adapter against the loopback Messages
API, whose emulated prompt cache hits by prefix and expires as time passes, the benchmark
letting it pass at once (:mod:`retinue.llm._prompt_cache`): a ~6,000-token role prompt,
four turns a minute apart,
then a pause, then the parent's next message. For each pause and lifetime: the tokens the
first request after the pause reads from the cache and writes to it, and what the whole
session costs in base-input-token units at Anthropic's documented multipliers (a 5-minute
write 1.25, a 1-hour write 2, a read 0.1; prompt-caching page, "Pricing").

Run: ``uv run python benchmarks/cache_ttl_bench.py``. Writes ``results/cache_ttl.json``,
``results/cache_ttl.md`` and that section of ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

from compress_bench import write_section

from retinue.engine import RunConfig, run
from retinue.llm._prompt_cache import CacheUse
from retinue.llm.anthropic import AnthropicModel
from retinue.llm.loopback_anthropic import LoopbackAnthropicServer
from retinue.llm.settings import ModelSettings
from retinue.messages import Message, SystemMessage, UserMessage
from retinue.testing import ScriptedModel
from retinue.tools.base import ToolContext, ToolRegistry

HERE = Path(__file__).parent
RESULTS = HERE / "results" / "cache_ttl.json"
ROLE_PROMPT = "You review pull requests for the payments team; cite file and line. " * 330
PAUSES = (0.5, 4, 6, 10, 30, 55, 65)  # minutes
PRICE = {"uncached": 1.0, "read": 0.1, "5m": 1.25, "1h": 2.0}


def cost(use: CacheUse, prompt: int) -> float:
    uncached = prompt - use.read - use.written
    return (
        uncached * PRICE["uncached"]
        + use.read * PRICE["read"]
        + use.written_5m * PRICE["5m"]
        + use.written_1h * PRICE["1h"]
    )


async def session(pause_min: float, ttl: str | None) -> dict[str, Any]:
    reply = "Looked at it: " + "a finding with its file and line. " * 20
    server = LoopbackAnthropicServer(ScriptedModel(responder=lambda m, t: reply)).start()
    base = AnthropicModel("claude-fable-5-2", base_url=server.base_url, max_retries=0)
    model = base.with_settings(ModelSettings(cache_ttl=ttl))
    tmp = Path(tempfile.gettempdir())
    ctx = ToolContext("bench", tmp, tmp)
    messages: list[Message] = [SystemMessage(ROLE_PROMPT)]
    prompts: list[int] = []
    try:
        for turn in range(5):
            server.cache.advance(pause_min * 60 if turn == 4 else 60)
            messages.append(UserMessage(f"turn {turn}: " + "review the next change. " * 20))
            out = await run(RunConfig(model, messages, ToolRegistry(), ctx, interactive=True))
            messages = out.messages
            prompts.append(out.usage.input_tokens)
    finally:
        await base.aclose()
        server.close()
    uses = server.cache_uses
    after = uses[-1]
    return {
        "pause_minutes": pause_min,
        "ttl": ttl or "5m",
        "first_request_prompt": prompts[-1],
        "first_request_read": after.read,
        "first_request_written": after.written,
        "first_request_cost": round(cost(after, prompts[-1])),
        "session_cost": round(sum(cost(u, p) for u, p in zip(uses, prompts, strict=True))),
    }


def fragment(rows: list[dict[str, Any]]) -> str:
    by = {(r["pause_minutes"], r["ttl"]): r for r in rows}
    lines = [
        "## Prompt-cache lifetime of an idle session (issue 44)",
        "",
        "One interactive session through Retinue's Anthropic adapter against the loopback "
        "Messages API (prefix cache emulated, time let pass at once): a ~6,000-token role "
        "prompt, four turns a minute apart, a pause, then the next message. First request "
        "after the pause: tokens read from the cache; cost in base-input-token units (write "
        "5m 1.25, write 1h 2, read 0.1). `benchmarks/cache_ttl_bench.py`.",
        "",
        "| pause | read, 5m | read, 1h | first request, 5m | first request, 1h "
        "| session, 5m | session, 1h |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for pause in PAUSES:
        a, b = by[(pause, "5m")], by[(pause, "1h")]
        lines.append(
            f"| {pause:g} min | {a['first_request_read']:,} | {b['first_request_read']:,} | "
            f"{a['first_request_cost']:,} | {b['first_request_cost']:,} | "
            f"{a['session_cost']:,} | {b['session_cost']:,} |"
        )
    lines += [
        "",
        "Past five minutes the default cache is gone and the whole prefix is written again; "
        "the hour keeps it until 60 minutes, for writes that cost 2 instead of 1.25.",
        "",
    ]
    return "\n".join(lines)


async def main() -> None:
    rows = [await session(p, ttl) for p in PAUSES for ttl in (None, "1h")]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"benchmark": "cache_ttl", "rows": rows}, indent=2) + "\n")
    text = fragment(rows)
    (RESULTS.parent / "cache_ttl.md").write_text(text)
    write_section(HERE / "RESULTS.md", text)
    print(text)


if __name__ == "__main__":
    asyncio.run(main())
