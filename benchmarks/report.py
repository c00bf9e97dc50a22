"""Render the runner's results as ``RESULTS.md``: machine, versions, every figure, the
issue's targets and where Retinue stands against them."""

from __future__ import annotations

from typing import Any

from local_report import local_section

LABELS = {
    "t100": "100 turns",
    "t10": "10 turns",
    "h10": "10 turns after 10 msgs",
    "h200": "10 turns after 200 msgs",
}


def _ms(v: float | None) -> str:
    if v is None:
        return "–"
    return f"{v:.3f}" if v < 1 else f"{v:.2f}" if v < 10 else f"{v:.1f}"


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.3f}×" if a is not None and b else "–"


def _pct(v: float) -> str:
    return f"{100 * v:.1f}%"


def _flag(meta: dict[str, Any]) -> str:
    return " --quick" if meta["mode"] == "quick" else ""


def overhead_table(summary: dict[str, Any], variant: str) -> list[str]:
    fws = [fw for fw in summary if summary[fw].get(variant)]
    head = "| ms per turn | " + " | ".join(fws) + " | Retinue / fastest peer |"
    lines = [head, "|" + "---|" * (len(fws) + 2)]
    for label, text in LABELS.items():
        vals = {fw: summary[fw][variant].get(label) for fw in fws}
        peers = [v for fw, v in vals.items() if fw != "retinue" and v is not None]
        cells = " | ".join(_ms(vals[fw]) for fw in fws)
        lines.append(
            f"| {text} | {cells} | {_ratio(vals.get('retinue'), min(peers, default=None))} |"
        )
    return lines


def refs_table(refs: dict[str, dict[str, float]], retinue: dict[str, float]) -> list[str]:
    names = {
        "http_client": "bare `http.client` loop (floor)",
        "sdk_post": "`openai` SDK `client.post`, ready body",
        "sdk_create": "`openai` SDK `chat.completions.create`",
    }
    lines = ["| ms per request | " + " | ".join(LABELS.values()) + " |", "|---" * 5 + "|"]
    for key, text in names.items():
        lines.append(f"| {text} | " + " | ".join(_ms(refs[key].get(k)) for k in LABELS) + " |")
    lines.append(
        "| Retinue (`OpenAIModel` + run loop) | "
        + " | ".join(_ms(retinue.get(k)) for k in LABELS)
        + " |"
    )
    lines.append(
        "| Retinue / floor | "
        + " | ".join(_ratio(retinue.get(k), refs["http_client"].get(k)) for k in LABELS)
        + " |"
    )
    return lines


def targets(r: dict[str, Any]) -> list[str]:
    s = r["overhead"]["summary"]
    ret = s["retinue"]
    peers = [fw for fw in s if fw != "retinue"]

    def best(variant: str) -> float | None:
        vals = [s[fw][variant]["t100"] for fw in peers if s[fw].get(variant, {}).get("t100")]
        return min(vals, default=None)

    a = ret["inproc"]["t100"] / best("inproc") if best("inproc") else None
    b = ret["loopback"]["t100"] / best("loopback") if best("loopback") else None
    floor = ret.get("refs", {}).get("http_client", {}).get("t100")
    fl = ret["loopback"]["t100"] / floor if floor else None
    flat_in = ret["inproc"]["h200"] / ret["inproc"]["h10"]
    flat_lb = ret["loopback"]["h200"] / ret["loopback"]["h10"]
    big = max(r["sessions"], key=lambda x: x["sessions"])
    idle = r["idle"]
    help_ = r["startup"].get("retinue_help", {})

    def ok(cond: bool | None) -> str:
        return "–" if cond is None else ("met" if cond else "**not met**")

    rows = [
        (
            "(1a) in process ≤ 0.1× fastest peer, 100 turns",
            _ratio(a, 1) if a else "no peers",
            ok(a <= 0.1 if a else None),
        ),
        (
            "(1b) loopback ≤ 0.1× fastest peer, 100 turns",
            _ratio(b, 1) if b else "no peers",
            ok(b <= 0.1 if b else None),
        ),
        (
            "(1b) loopback within 4× the bare-socket floor, 100 turns",
            _ratio(fl, 1) if fl else "–",
            ok(fl <= 4 if fl else None),
        ),
        (
            "per-turn cost flat in history (200 vs 10 msgs), in process",
            f"{flat_in:.2f}×",
            ok(flat_in <= 1.5),
        ),
        (
            "per-turn cost flat in history (200 vs 10 msgs), loopback",
            f"{flat_lb:.2f}×",
            ok(flat_lb <= 1.5),
        ),
        (
            f"{big['sessions']:,} concurrent sessions on this machine",
            f"{big['calls_per_s']:,.0f} calls/s",
            ok(big["model_calls"] == big["sessions"] * big["turns"]),
        ),
        (
            "idle session memory ≤ 2× its message bytes",
            f"{idle['ratio']:.2f}×",
            ok(idle["ratio"] <= 2),
        ),
        (
            "no leak after unloading all sessions",
            f"{idle['leak_per_session_bytes']:.1f} B/session",
            ok(abs(idle["leak_per_session_bytes"]) < 16),
        ),
        (
            "cache prefix share 100% (no compression)",
            _pct(r["cache"]["kept_min"]),
            ok(r["cache"]["kept_min"] >= 1.0),
        ),
        (
            "`retinue --help` ≤ 0.3 s",
            f"{help_.get('median_s', float('nan')):.3f} s"
            + ("" if not help_.get("returncode") else " (failed)"),
            ok(help_.get("median_s", 9) <= 0.3 and not help_.get("returncode")),
        ),
    ]
    lines = ["| Target (issue 7) | Where we stand | |", "|---|---|---|"]
    lines += [f"| {t} | {v} | {o} |" for t, v, o in rows]
    return lines


def lifecycle_section(data: dict[str, Any]) -> list[str]:
    """``results/lifecycle_fuzz.json`` (``benchmarks/lifecycle_fuzz.py``) as a table."""
    out = [
        "## 6. Session lifecycles under cancellation, faults and races",
        "",
        f"`lifecycle_fuzz.py`: the nested interactive scenario (main → a and a:x → b, b in the "
        f"background → c), random latency in model calls, memory render and consolidation; "
        f"{data['runs']:,} runs in {data['seconds']} s (seed {data['seed']}).",
        "",
        "| attack | runs | hangs | runs with orphans | lost consolidations "
        "| double consolidations | leaked tasks | invalid histories | sessions |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, t in data["attacks"].items():
        out.append(
            f"| {name} | {t['runs']:,} | {t['hangs']} | {t['runs_with_orphans']} "
            f"| {t['lost_consolidations']} | {t['double_consolidations']} | {t['leaked_tasks']} "
            f"| {t['invalid_histories']} | {t['sessions']:,} |"
        )
    out += [
        "",
        "All zeros is the claim: `tests/subagents/test_lifecycle_fuzz.py` runs the same attacks "
        "at CI size on every test run.",
    ]
    return out


def render(r: dict[str, Any]) -> str:
    m = r["meta"]
    s = r["overhead"]["summary"]
    ret = s["retinue"]
    p = m.get("params", {})
    out = [
        "# Retinue benchmarks, side by side with the peers",
        "",
        f"Generated by `uv run python benchmarks/run.py{_flag(m)}` "
        f"on {m['date']} ({m['mode']} mode, {m.get('wall_s', 0):.0f} s).",
        "",
        f"- Machine: {m['machine']}; CPU: {m['cpu']}; Python {m['python']}",
        "- Versions: " + ", ".join(f"{k} {v}" for k, v in m["versions"].items()),
        f"- Method: {p.get('rounds')} interleaved rounds (order rotated each round), each a fresh "
        f"process running {p.get('repeats')} timed repeats after one warm-up; figures are medians "
        "of the per-round medians. Ratios are the claim; absolute times are noisy on a shared "
        "machine.",
        "",
        "## Targets and where we stand",
        "",
        *targets(r),
        "",
        "## 1a. Engine overhead per model round trip, in process",
        "",
        "Each framework's own fake model (Retinue `ScriptedModel`, openai-agents a `Model` "
        "subclass, pydantic-ai `FunctionModel`, LangGraph a minimal `BaseChatModel`); each turn "
        "the model asks for one no-op tool, the last turn answers.",
        "",
        *overhead_table(s, "inproc"),
        "",
        "## 1b. Over loopback HTTP (one shared OpenAI-compatible server)",
        "",
        "Every framework talks Chat Completions to the same `LoopbackOpenAIServer` "
        "(keep-alive, Nagle off, answers from a stateless scripted responder).",
        "",
        *overhead_table(s, "loopback"),
        "",
    ]
    if "refs" in ret:
        out += ["References on the same server (same request bodies Retinue sends):", ""]
        out += refs_table(ret["refs"], ret["loopback"])
        out.append("")
    dg = ret["delegation"]
    out += ["## 2. Sub-agent delegation overhead (20 delegations, in process)", ""]
    out += ["| ms per delegation | |", "|---|---|"]
    out.append(f"| Retinue interactive (one session, growing history) | {_ms(dg['interactive'])} |")
    out.append(f"| Retinue one-shot (fresh conversation each time) | {_ms(dg['one_shot'])} |")
    agents = s.get("openai-agents", {}).get("delegation_as_tool")
    out.append(f"| openai-agents `Agent.as_tool` | {_ms(agents)} |")
    if agents:
        out.append(f"| Retinue interactive / as_tool | {_ratio(dg['interactive'], agents)} |")
    out += ["", "## 3. Interactive sessions at scale (5 turns each, 20 ms simulated latency)", ""]
    out += [
        "| sessions | model calls | wall s | calls/s | ideal calls/s | peak RSS growth MiB |",
        "|---|---|---|---|---|---|",
    ]
    for x in r["sessions"]:
        out.append(
            f"| {x['sessions']:,} | {x['model_calls']:,} | {x['wall_s']:.2f} "
            f"| {x['calls_per_s']:,.0f} "
            f"| {x['ideal_calls_per_s']:,.0f} | {x['rss_growth_peak_mib']:.1f} |"
        )
    i = r["idle"]
    out += [
        "",
        f"Idle sessions ({i['sessions']:,}, each with a {i['history_turns']}-turn history, "
        f"{i['messages_per_session']:.0f} messages), measured with tracemalloc:",
        "",
        f"- memory held per idle session: {i['bytes_per_session']:,.0f} B; UTF-8 size of its "
        f"messages: {i['message_bytes_per_session']:,.0f} B; ratio **{i['ratio']:.2f}×**",
        f"- after unloading all: {i['left_after_unload_bytes']:,} B still held (container tables "
        f"at their high-water size); a second build + unload round adds "
        f"{i['leak_second_round_bytes']:,} B "
        f"(**{i['leak_per_session_bytes']:.2f} B per session**)",
        f"- traced peak while building: {i['traced_peak_mib']:.1f} MiB; build time "
        f"(under tracemalloc) {i['build_s']:.1f} s",
        "",
        "## 4. Cache-friendliness (share of the previous request repeated as the prefix)",
        "",
        "| | requests | kept (min) | kept (mean) | cached share of request (mean) |",
        "|---|---|---|---|---|",
    ]
    c = r["cache"]
    out.append(
        f"| Retinue interactive session, 10 turns (tool + answer each) | {c['requests']} "
        f"| {_pct(c['kept_min'])} | {_pct(c['kept_mean'])} | {_pct(c['cached_mean'])} |"
    )
    for fw, pc in r["overhead"].get("peer_cache", {}).items():
        out.append(
            f"| {fw}, 10-turn tool run over loopback | {pc['requests']} | {_pct(pc['kept_min'])} "
            f"| {_pct(pc['kept_mean'])} | {_pct(pc['cached_mean'])} |"
        )
    out += [
        "",
        "## 5. Start-up (fresh process, median)",
        "",
        "| command | median s | min s | status |",
        "|---|---|---|---|",
    ]
    nan = float("nan")
    for x in r["startup"].values():
        status = (
            "ok"
            if not x.get("returncode") and not x.get("error")
            else f"failed: {' '.join(x.get('error', []))}"
        )
        out.append(
            f"| `{x['command']}` | {x.get('median_s', nan):.3f} | {x.get('min_s', nan):.3f} "
            f"| {status} |"
        )
    others = dict(r.get("others") or {})
    if "lifecycle_fuzz" in others:
        out += ["", *lifecycle_section(others.pop("lifecycle_fuzz"))]
    out += ["", *local_section(others)]
    if others:
        out += ["", "## Other benchmarks in this folder (their own result files)", ""]
        for name, data in others.items():
            keys = ", ".join(list(data)[:8]) if isinstance(data, dict) else type(data).__name__
            out.append(f"- `results/{name}.json` (see its script): {keys}")
    out.append("")
    return "\n".join(out)
