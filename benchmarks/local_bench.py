"""Speed of the embedded local model: load time, first-token latency and tokens per second.

Run: ``uv run --extra local python benchmarks/local_bench.py [--runs N] [--home DIR]``.
Writes ``benchmarks/results/local.json``. The model file is assembled first if needed (that
time is reported separately and is not part of the load time).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import time
from pathlib import Path
from typing import Any

from retinue.config import default_home
from retinue.llm.local import LocalModel
from retinue.messages import UserMessage

RESULTS = Path(__file__).parent / "results" / "local.json"

PROMPTS = [
    "Explain in three sentences what a Python context manager is.",
    "Write a Python function that reverses a string, with a docstring.",
    "List five common HTTP status codes and what they mean.",
    "Describe the difference between a list and a tuple in Python.",
    "What does the SQL GROUP BY clause do? Give a short example.",
]

# About 1,500 tokens of distinct lines, so prompt processing (not the prefix cache) is timed.
LONG_PROMPT = "Summarise this log in one sentence:\n" + "\n".join(
    f"line {i}: worker {i % 7} processed batch {i * 13} in {i % 50 + 3} ms" for i in range(90)
)


async def one_call(model: LocalModel, prompt: str) -> dict[str, float]:
    """Time one streamed answer: first-token latency and decode speed after it."""
    first: list[float] = []

    def on_text(_text: str) -> None:
        if not first:
            first.append(time.perf_counter())

    start = time.perf_counter()
    response = await model.complete([UserMessage(prompt)], on_text=on_text)
    end = time.perf_counter()
    ttft = (first[0] if first else end) - start
    out_tokens = response.usage.output_tokens
    decode_s = end - (first[0] if first else start)
    return {
        "first_token_s": ttft,
        "total_s": end - start,
        "prompt_tokens": response.usage.input_tokens,
        "output_tokens": out_tokens,
        "decode_tokens_per_s": (out_tokens - 1) / decode_s if decode_s > 0 else 0.0,
        "overall_tokens_per_s": out_tokens / (end - start),
    }


async def main(runs: int, home: Path, n_threads: int) -> dict[str, Any]:
    model = LocalModel(home=home, n_threads=n_threads, max_tokens=256, temperature=0.0)
    t0 = time.perf_counter()
    path = model.model_path()
    assemble_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    await model.load()
    load_s = time.perf_counter() - t0
    calls = [await one_call(model, PROMPTS[i % len(PROMPTS)]) for i in range(runs)]
    long = await one_call(model, LONG_PROMPT)

    def median(key: str) -> float:
        return round(statistics.median(c[key] for c in calls), 3)

    return {
        "model": model.name,
        "file": path.name,
        "machine": {"cpu": platform.processor() or platform.machine(), "n_threads": n_threads},
        "assemble_or_check_s": round(assemble_s, 3),
        "load_s": round(load_s, 3),
        "runs": runs,
        "median_first_token_s": median("first_token_s"),
        "median_decode_tokens_per_s": median("decode_tokens_per_s"),
        "median_overall_tokens_per_s": median("overall_tokens_per_s"),
        "median_prompt_tokens": median("prompt_tokens"),
        "median_output_tokens": median("output_tokens"),
        "long_prompt": {
            "prompt_tokens": long["prompt_tokens"],
            "first_token_s": round(long["first_token_s"], 3),
            "prompt_tokens_per_s": round(long["prompt_tokens"] / long["first_token_s"], 1),
        },
        "calls": [{k: round(v, 3) for k, v in c.items()} for c in calls],
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Local model speed benchmark.")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--home", type=Path, default=None, help="RETINUE_HOME (default: env)")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    result = asyncio.run(main(args.runs, args.home or default_home(), args.threads))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    summary = {k: v for k, v in result.items() if k != "calls"}
    print(json.dumps(summary, indent=2))
    print(f"written to {RESULTS}")
