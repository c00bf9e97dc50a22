"""Speed of the embedded local model: load time, first-token latency and tokens per second.

Run: ``uv run --extra local python benchmarks/local_bench.py [--model NAME] [--runs N]
[--home DIR]``. Writes ``benchmarks/results/local.json`` for the 0.5B model, and
``local_<model>.json`` for another tier (``--model qwen2.5-coder-1.5b``, which needs the
``local-1.5b`` extra too). The model file is assembled first if needed (that time is reported
separately and is not part of the load time). Also reported: the worker process's resident
memory after load and its peak (``VmRSS``, ``VmHWM``: the mapped model pages it touched
included), and the machine's load average before and after.

``--compare PYTHON`` measures a second llama-cpp-python build (the interpreter of another
environment that has retinue and that build installed) in the same session: the two run in
alternating rounds, and the ratios are taken round by round. The results, with both builds'
figures, go to ``benchmarks/results/local_builds.json``. Each figure is reported with the
wall and CPU time of its round and the machine's load average.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from retinue.config import default_home
from retinue.llm.local import DEFAULT_LOCAL_MODEL, LocalModel
from retinue.messages import UserMessage

RESULTS = Path(__file__).parent / "results" / "local.json"
BUILDS = Path(__file__).parent / "results" / "local_builds.json"

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


TOOL_PROMPTS = [
    "Show me what is in README.md.",
    "Run the test suite with pytest.",
    "Find every file that mentions TODO.",
]


async def grammar_cost(model: LocalModel, runs: int) -> dict[str, Any]:
    """Decode speed with the main agent's tools offered, grammar on and off, alternating."""
    from retinue.subagents.tools import subagent_tools
    from retinue.tools.builtin import builtin_tools

    specs = [t.spec for t in (*builtin_tools(), *subagent_tools())]
    rates: dict[str, list[float]] = {"on": [], "off": []}
    for i in range(runs):
        for label in ("on", "off") if i % 2 == 0 else ("off", "on"):
            model.constrain = label == "on"
            prompt = [UserMessage(TOOL_PROMPTS[i % len(TOOL_PROMPTS)])]
            response = await model.complete(prompt, specs)
            seconds = model.last_timing.get("generate_seconds") or 0.0
            if seconds > 0 and response.usage.output_tokens > 1:
                rates[label].append((response.usage.output_tokens - 1) / seconds)
    model.constrain = True
    on = statistics.median(rates["on"]) if rates["on"] else None
    off = statistics.median(rates["off"]) if rates["off"] else None
    return {
        "decode_tokens_per_s_grammar_on": round(on, 2) if on else None,
        "decode_tokens_per_s_grammar_off": round(off, 2) if off else None,
        "on_over_off": round(on / off, 3) if on and off else None,
        "samples": {k: [round(v, 2) for v in vs] for k, vs in rates.items()},
    }


def worker_memory(pid: int | None) -> dict[str, float | None]:
    """The worker's resident and peak resident memory in MiB (Linux ``/proc``; else None)."""
    found: dict[str, float | None] = {"rss_mib": None, "peak_rss_mib": None}
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines() if pid else []
    except OSError:
        return found
    for line in lines:
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            mib = round(int(value.split()[0]) / 1024, 1)
            found["rss_mib" if key == "VmRSS" else "peak_rss_mib"] = mib
    return found


def results_file(model: str) -> Path:
    """Where a tier's figures go: ``local.json`` for the first tier (as before)."""
    if model == DEFAULT_LOCAL_MODEL:
        return RESULTS
    return RESULTS.with_name(f"local_{model}.json")


async def main(
    runs: int, home: Path, n_threads: int, name: str = DEFAULT_LOCAL_MODEL
) -> dict[str, Any]:
    load_before = [round(x, 2) for x in os.getloadavg()]
    model = LocalModel(name, home=home, n_threads=n_threads, max_tokens=256, temperature=0.0)
    t0 = time.perf_counter()
    path = model.model_path()
    assemble_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    await model.load()
    load_s = time.perf_counter() - t0
    loaded = worker_memory(model.worker().pid)
    calls = [await one_call(model, PROMPTS[i % len(PROMPTS)]) for i in range(runs)]
    long = await one_call(model, LONG_PROMPT)
    grammar = await grammar_cost(model, runs)
    peak = worker_memory(model.worker().pid)

    def median(key: str) -> float:
        return round(statistics.median(c[key] for c in calls), 3)

    return {
        "model": model.name,
        "file": path.name,
        "machine": {"cpu": platform.processor() or platform.machine(), "n_threads": n_threads},
        "python": sys.executable,
        "assemble_or_check_s": round(assemble_s, 3),
        "load_s": round(load_s, 3),
        "rss_mib_after_load": loaded["rss_mib"],
        "peak_rss_mib": peak["peak_rss_mib"],
        "load_average": {"before": load_before, "after": [round(x, 2) for x in os.getloadavg()]},
        "tool_format": model.tool_format,
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
        "grammar": grammar,
        "calls": [{k: round(v, 3) for k, v in c.items()} for c in calls],
    }


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def one_round(python: str, runs: int, home: Path, threads: int) -> dict[str, Any]:
    """This script under ``python``, in a fresh process: its result plus wall/CPU/load."""
    cmd = [python, __file__, "--runs", str(runs), "--home", str(home)]
    cmd += ["--threads", str(threads), "--stdout"]
    cpu0, wall0 = _child_cpu(), time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    wall, cpu = time.perf_counter() - wall0, _child_cpu() - cpu0
    if done.returncode != 0:
        return {"error": f"exit {done.returncode}", "stderr": done.stderr[-2000:]}
    result = json.loads(done.stdout.splitlines()[-1])
    result.update(wall_s=round(wall, 2), cpu_s=round(cpu, 2), loadavg=os.getloadavg()[0])
    return result


def compare(other: str, rounds: int, runs: int, home: Path, threads: int) -> dict[str, Any]:
    pairs = []
    for i in range(rounds):
        order = [("this", sys.executable), ("other", other)]
        if i % 2:
            order.reverse()
        pairs.append({label: one_round(py, runs, home, threads) for label, py in order})

    def ratios(key: str) -> list[float]:
        return [
            p["this"][key] / p["other"][key]
            for p in pairs
            if key in p["this"] and key in p["other"] and p["other"][key]
        ]

    decode = ratios("median_decode_tokens_per_s")
    return {
        "rounds": rounds,
        "this_python": sys.executable,
        "other_python": other,
        "decode_ratio_per_round": [round(r, 3) for r in decode],
        "median_decode_ratio": round(statistics.median(decode), 3) if decode else None,
        "pairs": pairs,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Local model speed benchmark.")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--model", default=DEFAULT_LOCAL_MODEL, help="an embedded model")
    parser.add_argument("--home", type=Path, default=None, help="RETINUE_HOME (default: env)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--stdout", action="store_true", help="print the result as one line")
    parser.add_argument("--compare", metavar="PYTHON", help="another build's interpreter")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    home = args.home or default_home()
    if args.compare:
        report = compare(args.compare, args.rounds, args.runs, home, args.threads)
        BUILDS.parent.mkdir(parents=True, exist_ok=True)
        BUILDS.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        print(json.dumps({k: v for k, v in report.items() if k != "pairs"}, indent=2))
        print(f"written to {BUILDS}")
        sys.exit(0)
    result = asyncio.run(main(args.runs, home, args.threads, args.model))
    if args.stdout:
        print(json.dumps(result))
        sys.exit(0)
    out = results_file(args.model)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    summary = {k: v for k, v in result.items() if k != "calls"}
    print(json.dumps(summary, indent=2))
    print(f"written to {out}")
