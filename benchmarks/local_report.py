"""The embedded model's section of ``RESULTS.md``: speed of the portable build next to a native
one, the tiers and tool formats side by side, and the agent task suite (``local_bench.py``,
``agent_tasks.py``)."""

from __future__ import annotations

import re
import statistics
from typing import Any

from agent_tasks import quantile

__all__ = ["LOCAL_KEYS", "local_section", "rounds_table"]

LOCAL_KEYS = ("local", "local_builds")
TASKS_PREFIX = "agent_tasks_"
TIER_PREFIX = "local_qwen"  # local_bench.py's file for a tier other than the first
ROUND_TAG = re.compile(r"_r(\d+)$")  # agent_tasks.py --tag rN: round N of a rotated series


def _median(pairs: list[dict[str, Any]], side: str, key: str) -> float | None:
    values = [p[side][key] for p in pairs if key in p.get(side, {})]
    return statistics.median(values) if values else None


def _num(v: float | None, digits: int = 1) -> str:
    return "–" if v is None else f"{v:,.{digits}f}"


def builds_table(data: dict[str, Any]) -> list[str]:
    pairs = data["pairs"]
    rows = [
        ("decode tokens/s (median)", "median_decode_tokens_per_s", 1),
        ("first token, short prompt (s)", "median_first_token_s", 3),
        ("model load in a fresh worker (s)", "load_s", 2),
    ]
    out = [
        f"{data['rounds']} rounds, the two builds alternating (order swapped each round), each "
        "round a fresh process; ratios are taken within a round. Wall and CPU time are the whole "
        "round's (load, 3 short answers, one ~1,800-token prompt).",
        "",
        "| | portable (shipped) | native, AMX off | portable / native |",
        "|---|---|---|---|",
    ]
    for label, key, digits in rows:
        a, b = _median(pairs, "this", key), _median(pairs, "other", key)
        ratio = f"{a / b:.2f}×" if a is not None and b else "–"
        out.append(f"| {label} | {_num(a, digits)} | {_num(b, digits)} | {ratio} |")
    prompt_rates = {
        side: [
            p[side]["long_prompt"]["prompt_tokens_per_s"] for p in pairs if "long_prompt" in p[side]
        ]
        for side in ("this", "other")
    }
    a = statistics.median(prompt_rates["this"]) if prompt_rates["this"] else None
    b = statistics.median(prompt_rates["other"]) if prompt_rates["other"] else None
    ratio = f"{a / b:.2f}×" if a is not None and b else "–"
    out.append(f"| prompt tokens/s (~1,800 tokens) | {_num(a)} | {_num(b)} | {ratio} |")
    for label, key in (
        ("grammar on", "decode_tokens_per_s_grammar_on"),
        ("off", "decode_tokens_per_s_grammar_off"),
    ):
        values = {
            side: [p[side]["grammar"][key] for p in pairs if p[side].get("grammar", {}).get(key)]
            for side in ("this", "other")
        }
        a = statistics.median(values["this"]) if values["this"] else None
        b = statistics.median(values["other"]) if values["other"] else None
        out.append(f"| decode tokens/s with tools offered, {label} | {_num(a)} | {_num(b)} | |")
    for label, key in (("round wall (s)", "wall_s"), ("round CPU (s)", "cpu_s")):
        a, b = _median(pairs, "this", key), _median(pairs, "other", key)
        out.append(f"| {label} | {_num(a)} | {_num(b)} | |")
    loads = [p[s]["loadavg"] for p in pairs for s in ("this", "other") if "loadavg" in p[s]]
    if loads:
        out += ["", f"Load average during the rounds: {min(loads):.1f}–{max(loads):.1f}."]
    out += [
        "",
        "The tool-call grammar rows time the last step of a constrained reply (the answer or the "
        "chosen tool's arguments) against the same prompts decoded freely; the grammar's cost "
        "is their ratio.",
    ]
    decode = data.get("decode_ratio_per_round") or []
    if decode:
        per_round = ", ".join(f"{r:.2f}×" for r in decode)
        out += ["", f"Decode ratio per round: {per_round} (median {data['median_decode_ratio']}×)."]
    return out


def tasks_table(name: str, data: dict[str, Any]) -> list[str]:
    out = [
        f"`{data['model']}`: **{data['passed']} of {data['tasks']}** tasks done "
        f"(median {data['median_seconds']} s per task).",
        "",
        "| task | done | seconds | tools called | answer (start) |",
        "|---|---|---|---|---|",
    ]
    for r in data["results"]:
        answer = " ".join(str(r["answer"]).split())[:90].replace("|", "\\|")
        tools = ", ".join(r["tools"]) or "–"
        out.append(
            f"| {r['task']} | {'yes' if r['ok'] else 'no'} | {r['seconds']} | {tools} | {answer} |"
        )
    return out


def _set(data: dict[str, Any], name: str) -> str:
    found = (data.get("sets") or {}).get(name)
    return f"{found['passed']}/{found['tasks']}" if found else "–"


def pairs_table(tasks: dict[str, Any], speeds: dict[str, Any]) -> list[str]:
    """One row per (model, tool format) suite run that reports its sets; the model's speed
    figures (``local_bench.py``, by model) beside it."""
    runs = [d for d in tasks.values() if d.get("sets") and d.get("format")]
    if not runs:
        return []
    out = [
        "| model | tool format | main set (10) | extra set (5) | median s/task | p90 s/task "
        "| median CPU s/task | decode tokens/s | first token (s) | load (s) | peak RSS (MiB) "
        "| load average |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for d in sorted(runs, key=lambda d: (d["model"], d["format"])):
        speed = speeds.get(d["model"], {})
        loads = [x for run in d.get("load_average") or [] for x in (*run["before"], *run["after"])]
        sampled = d.get("load_average_1min_sampled") or {}  # a run stopped early (no summary)
        loads += [sampled[k] for k in ("min", "max") if k in sampled]
        load = f"{min(loads):.1f}–{max(loads):.1f}" if loads else "–"
        out.append(
            f"| `{d['model']}` | {d['format']} | {_set(d, 'main')} | {_set(d, 'extra')} "
            f"| {d['median_seconds']} | {d.get('p90_seconds', '–')} "
            f"| {d.get('median_cpu_seconds', '–')} "
            f"| {_num(speed.get('median_decode_tokens_per_s'))} "
            f"| {_num(speed.get('median_first_token_s'), 2)} | {_num(speed.get('load_s'), 2)} "
            f"| {_num(speed.get('peak_rss_mib'), 0)} | {load} |"
        )
    return out


def _passes(results: list[dict[str, Any]], which: str) -> str:
    chosen = [r for r in results if r["set"] == which]
    return f"{sum(r['ok'] for r in chosen)}/{len(chosen)}" if chosen else "–"


def rounds_table(tasks: dict[str, Any], speeds: dict[str, Any]) -> list[str]:
    """One row per (model, tool format) over its rounds (files tagged ``rN``): the passes of
    each round on each set, and the seconds of every task of every round pooled."""
    by_pair: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for name, data in sorted(tasks.items()):
        if ROUND_TAG.search(name) and data.get("format"):
            by_pair.setdefault((data["model"], data["format"]), []).append(data)
    if not by_pair:
        return []
    out = [
        "| model | tool format | rounds | main set (10), each round | extra set (5), each round "
        "| all 15, pooled | median s/task | p90 s/task | median CPU s/task | stopped at limit "
        "| decode tokens/s | first token (s) | load (s) | peak RSS (MiB) | load average |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (model, fmt), runs in sorted(by_pair.items()):
        every = [r for d in runs for r in d["results"]]
        seconds = [r["seconds"] for r in every]
        # (a negative figure: a run before agent_tasks counted ended workers; left out)
        cpu = [r["cpu_seconds"] for r in every if r.get("cpu_seconds", -1) >= 0]
        stopped = sum("--task-limit" in str(r.get("answer", "")) for r in every)
        loads = [
            x for d in runs for run in d["load_average"] for x in (*run["before"], *run["after"])
        ]
        speed = speeds.get(model, {})
        out.append(
            f"| `{model}` | {fmt} | {len(runs)} "
            f"| {', '.join(_passes(d['results'], 'main') for d in runs)} "
            f"| {', '.join(_passes(d['results'], 'extra') for d in runs)} "
            f"| {sum(r['ok'] for r in every)}/{len(every)} "
            f"| {quantile(seconds, 0.5)} | {quantile(seconds, 0.9)} | {quantile(cpu, 0.5)} "
            f"| {stopped} | {_num(speed.get('median_decode_tokens_per_s'))} "
            f"| {_num(speed.get('median_first_token_s'), 2)} | {_num(speed.get('load_s'), 2)} "
            f"| {_num(speed.get('peak_rss_mib'), 0)} "
            f"| {f'{min(loads):.1f}–{max(loads):.1f}' if loads else '–'} |"
        )
    return out


def local_section(others: dict[str, Any]) -> list[str]:
    """Pops the embedded model's result files from ``others`` and renders them."""
    local = others.pop("local", None)
    builds = others.pop("local_builds", None)
    tasks = {k: others.pop(k) for k in list(others) if k.startswith(TASKS_PREFIX)}
    tiers = [others.pop(k) for k in list(others) if k.startswith(TIER_PREFIX)]
    speeds = {d["model"]: d for d in [*([local] if local else []), *tiers]}
    if not (local or builds or tasks):
        return []
    out = ["## 7. The embedded models (Qwen2.5-Coder 0.5B and 1.5B, llama.cpp on the CPU)", ""]
    rounds = rounds_table(tasks, speeds)
    if rounds:
        out += ["### Tiers and tool formats, rounds (`agent_tasks.py --set all --tag rN`)", ""]
        out += [*rounds, ""]
    pairs = pairs_table({k: v for k, v in tasks.items() if not ROUND_TAG.search(k)}, speeds)
    if pairs:
        out += ["### Tiers and tool formats (`agent_tasks.py --set all`)", "", *pairs, ""]
    if local:
        out += [
            "`local_bench.py`, shipped (portable) build, on the machine above, "
            f"{local['machine']['n_threads']} threads: load {local['load_s']} s, "
            f"first token {local['median_first_token_s']} s, "
            f"decode {local['median_decode_tokens_per_s']} tokens/s, "
            f"prompt {local['long_prompt']['prompt_tokens_per_s']} tokens/s.",
            "",
        ]
    if builds:
        out += [
            "### Portable build against a native one on this CPU",
            "",
            *builds_table(builds),
            "",
        ]
    for name, data in tasks.items():
        if ROUND_TAG.search(name):
            continue  # rounds are in their table; a task-by-task table each would be 12
        out += ["### Agent task suite (`agent_tasks.py`)", "", *tasks_table(name, data), ""]
    return out
