"""Render the runner's results as ``RESULTS.md``: machine, versions, every figure, the
issue's targets and where Retinue stands against them."""

from __future__ import annotations

from typing import Any

from _common import median
from local_report import local_section

LABELS = {
    "t100": "100 turns",
    "t10": "10 turns",
    "h10": "10 turns after 10 msgs",
    "h200": "10 turns after 200 msgs",
}
FLOOR_LABELS = {"t10": "10 turns", "t100": "100 turns", "t400": "400 turns"}
FLAT_TARGET = 1.5  # per-turn CPU, 200 vs 10 seeded messages
FLOOR_TARGET = 2.0  # Retinue / bare-socket floor, CPU, same round (issue 19)
PEER_TARGET = 0.1  # Retinue / fastest peer, same round (issue 7)
SCALE_TARGET = 1.25  # CPU per model call, 10,000 vs 1,000 sessions
IDLE_TARGET = 2048  # bytes an idle session holds beyond its history
LAG_TARGET_MS = 100.0
WALL_OVER_IDEAL_TARGET = 1.5  # blocking tools: wall time / what the pool's parallelism allows
FIRST_REQUEST_TARGET = 0.5
HELP_TARGET = 0.3
API_IMPORT_TARGET = 0.15
PROVIDER_IMPORT_TARGET = 0.3


def _ms(v: float | None) -> str:
    if v is None:
        return "–"
    return f"{v:.3f}" if v < 1 else f"{v:.2f}" if v < 10 else f"{v:.1f}"


def _x(v: float | None) -> str:
    return f"{v:.3f}×" if v is not None and v == v else "–"


def _pct(v: float) -> str:
    return f"{100 * v:.1f}%"


def _flag(meta: dict[str, Any]) -> str:
    return " --quick" if meta["mode"] == "quick" else ""


def _ok(cond: bool | None) -> str:
    return "–" if cond is None else ("met" if cond else "**not met**")


def _pair(cell: dict[str, float] | None) -> str:
    """``wall / CPU`` milliseconds."""
    if not cell:
        return "–"
    return f"{_ms(cell.get('wall'))} / {_ms(cell.get('cpu'))}"


def _spread(values: list[float] | None) -> tuple[float | None, str]:
    """The median of per-round ratios, and ``median (min–max)`` as text."""
    if not values:
        return None, "–"
    mid = median(values)
    if len(values) == 1:
        return mid, _x(mid)
    return mid, f"{_x(mid)} ({min(values):.3f}–{max(values):.3f})"


def overhead_table(r: dict[str, Any], variant: str) -> list[str]:
    summary = r["overhead"]["summary"]
    ratios = r["overhead"].get("ratios", {}).get("peer", {}).get(variant, {})
    fws = [fw for fw in summary if summary[fw].get(variant)]
    head = "| ms per turn, wall / CPU | " + " | ".join(fws)
    head += " | Retinue / fastest peer, wall | CPU |"
    lines = [head, "|" + "---|" * (len(fws) + 3)]
    for label, text in LABELS.items():
        cells = " | ".join(_pair(summary[fw][variant].get(label)) for fw in fws)
        per = ratios.get(label, {})
        wall, cpu = _spread(per.get("wall"))[1], _spread(per.get("cpu"))[1]
        lines.append(f"| {text} | {cells} | {wall} | {cpu} |")
    return lines


def refs_table(r: dict[str, Any]) -> list[str]:
    ret = r["overhead"]["summary"]["retinue"]
    refs = ret["refs"]
    labels = {**LABELS, **{k: v for k, v in FLOOR_LABELS.items() if k not in LABELS}}
    names = {
        "http_client": "bare `http.client` loop (floor)",
        "sdk_post": "`openai` SDK `client.post`, ready body",
        "sdk_create": "`openai` SDK `chat.completions.create`",
    }
    lines = ["| ms per request, wall / CPU | " + " | ".join(labels.values()) + " |"]
    lines.append("|---" * (len(labels) + 1) + "|")
    for key, text in names.items():
        row = refs.get(key, {})
        lines.append(f"| {text} | " + " | ".join(_pair(row.get(k)) for k in labels) + " |")
    lines.append(
        "| Retinue (`OpenAIModel` + run loop) | "
        + " | ".join(_pair(ret["loopback"].get(k)) for k in labels)
        + " |"
    )
    return lines


def floor_table(r: dict[str, Any]) -> list[str]:
    floor = r["overhead"].get("ratios", {}).get("floor", {})
    lines = [
        "| Retinue / floor, same round | wall | CPU | target (CPU) | |",
        "|---|---|---|---|---|",
    ]
    for label, text in FLOOR_LABELS.items():
        per = floor.get(label, {})
        cpu, cpu_text = _spread(per.get("cpu"))
        lines.append(
            f"| {text} | {_spread(per.get('wall'))[1]} | {cpu_text} | ≤ {FLOOR_TARGET:g}× "
            f"| {_ok(cpu <= FLOOR_TARGET if cpu is not None else None)} |"
        )
    return lines


def _mode(x: dict[str, Any]) -> str:
    """How the collector was set for a sessions row (older results: a bool)."""
    return x.get("collector_mode") or ("default" if x.get("collector", True) else "off")


_MODE_LABEL = {
    "default": "",
    "serve": " (collector as `retinue serve` sets it)",
    "off": " (cyclic GC off)",
}


def _scale_ratio(r: dict[str, Any], mode: str = "default") -> tuple[float | None, str]:
    by = {x["sessions"]: x for x in r["sessions"] if _mode(x) == mode}
    small, big = by.get(1000), by.get(10000)
    if not small or not big or "cpu_us_per_call" not in big:
        return None, "–"
    ratio = big["cpu_us_per_call"] / small["cpu_us_per_call"]
    text = f"{big['cpu_us_per_call']:.0f} µs vs {small['cpu_us_per_call']:.0f} µs: {ratio:.2f}×"
    return ratio, text


def _growth_beyond_floor(r: dict[str, Any]) -> tuple[float, str, float, float] | None:
    """Retinue's per-turn CPU growth from 10 to 200 seeded messages over loopback, divided
    by the floor's growth in the same round (its bodies are the same bytes: sending 20 times
    as many costs the kernel more, whoever sends them); the median (and spread) of the
    rounds, and Retinue's and the floor's own growth (medians of the rounds)."""
    mine, floors, beyond = [], [], []
    for res in r["overhead"].get("runs", {}).get("retinue", []):
        loop = res.get("loopback", {})
        ref = res.get("refs", {}).get("http_client", {})
        if not all(k in d and d[k].get("cpu") for d in (loop, ref) for k in ("h10", "h200")):
            continue
        a = loop["h200"]["cpu"] / loop["h10"]["cpu"]
        b = ref["h200"]["cpu"] / ref["h10"]["cpu"]
        mine.append(a)
        floors.append(b)
        beyond.append(a / b)
    if not beyond:
        return None
    v, shown = _spread(beyond)
    assert v is not None
    return v, shown, median(mine), median(floors)


def targets(r: dict[str, Any]) -> list[str]:
    ratios = r["overhead"].get("ratios", {})
    peer = ratios.get("peer", {})
    rows: list[tuple[str, str, str, str]] = []
    for variant, text in (("inproc", "in process"), ("loopback", "over loopback HTTP")):
        for m in ("wall", "cpu"):
            v, shown = _spread(peer.get(variant, {}).get("t100", {}).get(m))
            rows.append(
                (
                    f"Retinue / fastest peer, {text}, 100 turns, {m.upper() if m == 'cpu' else m}",
                    f"≤ {PEER_TARGET:g}×",
                    shown if v is not None else "no peers",
                    _ok(v <= PEER_TARGET if v is not None else None),
                )
            )
    floor = ratios.get("floor", {})
    for label, text in FLOOR_LABELS.items():
        v, shown = _spread(floor.get(label, {}).get("cpu"))
        wall = _spread(floor.get(label, {}).get("wall"))[1]
        rows.append(
            (
                f"Retinue / bare-socket floor, CPU, {text} (wall: {wall})",
                f"≤ {FLOOR_TARGET:g}×",
                shown,
                _ok(v <= FLOOR_TARGET if v is not None else None),
            )
        )
    ret = r["overhead"]["summary"]["retinue"]
    h200, h10 = ret["inproc"].get("h200"), ret["inproc"].get("h10")
    if h200 and h10 and h10.get("cpu"):
        flat = h200["cpu"] / h10["cpu"]
        rows.append(
            (
                "per-turn CPU flat in history (200 vs 10 msgs), in process",
                f"≤ {FLAT_TARGET:g}×",
                f"{flat:.2f}×",
                _ok(flat <= FLAT_TARGET),
            )
        )
    growth = _growth_beyond_floor(r)
    if growth is not None:
        v, shown, mine, floor = growth
        rows.append(
            (
                "per-turn CPU flat in history (200 vs 10 msgs), loopback, beyond the floor's "
                f"own growth in the same round (Retinue {mine:.2f}×, the floor {floor:.2f}×: "
                "20 times the bytes on the wire)",
                f"≤ {FLAT_TARGET:g}×",
                shown,
                _ok(v <= FLAT_TARGET),
            )
        )
    b = r.get("blocking")
    if b:
        rows.append(
            (
                f"{b['sessions']} sessions × one {b['block_ms']:.0f} ms sync tool: wall time "
                f"({b['threads']} threads: ideal {b['ideal_wall_s']:.2f} s, inline "
                f"{b['inline_wall_s']:.1f} s)",
                f"≤ {WALL_OVER_IDEAL_TARGET:g}× ideal",
                f"{b['wall_s']:.2f} s ({b['wall_over_ideal']:.2f}×)",
                _ok(b["wall_over_ideal"] <= WALL_OVER_IDEAL_TARGET),
            )
        )
        rows.append(
            (
                "… longest event-loop stall meanwhile (lag probe)",
                f"< {LAG_TARGET_MS:g} ms",
                f"{b['max_lag_ms']:.1f} ms",
                _ok(b["max_lag_ms"] < LAG_TARGET_MS),
            )
        )
    for mode, who in (
        ("default", "Python's collector settings (a program embedding the library)"),
        ("serve", "collector as `retinue serve` sets it"),
    ):
        scale, scale_text = _scale_ratio(r, mode)
        if scale is None and mode != "default":
            continue
        rows.append(
            (
                f"CPU per model call, 10,000 vs 1,000 concurrent sessions, {who}",
                f"≤ {SCALE_TARGET:g}×",
                scale_text,
                _ok(scale <= SCALE_TARGET if scale is not None else None),
            )
        )
    big = max(r["sessions"], key=lambda x: (_mode(x) == "default", x["sessions"]))
    rows.append(
        (
            f"{big['sessions']:,} concurrent sessions on this machine",
            "all calls made",
            f"{big['calls_per_s']:,.0f} calls/s",
            _ok(big["model_calls"] == big["sessions"] * big["turns"]),
        )
    )
    idle = r["idle"]
    beyond = idle.get("beyond_messages_per_session")
    rows.append(
        (
            "idle session: bytes held beyond its history (the message list and messages)",
            f"≤ {IDLE_TARGET:,} B",
            f"{beyond:,.0f} B" if beyond is not None else "–",
            _ok(beyond <= IDLE_TARGET if beyond is not None else None),
        )
    )
    rows.append(
        (
            "idle session memory vs its message text (UTF-8)",
            "≤ 2×",
            f"{idle['ratio']:.2f}×",
            _ok(idle["ratio"] <= 2),
        )
    )
    rows.append(
        (
            "no leak after unloading all sessions",
            "< 16 B/session",
            f"{idle['leak_per_session_bytes']:.1f} B/session",
            _ok(abs(idle["leak_per_session_bytes"]) < 16),
        )
    )
    rows.append(
        (
            "cache prefix share (no compression)",
            "100%",
            _pct(r["cache"]["kept_min"]),
            _ok(r["cache"]["kept_min"] >= 1.0),
        )
    )
    st = r["startup"]
    for key, text, limit in (
        ("first_request", "`retinue run` to its first model request", FIRST_REQUEST_TARGET),
        ("retinue_help", "`retinue --help`", HELP_TARGET),
        ("import_api", f"`{API_TEXT}`", API_IMPORT_TARGET),
        ("import_openai_provider", "`import retinue.llm.openai`", PROVIDER_IMPORT_TARGET),
    ):
        x = st.get(key)
        if not isinstance(x, dict):
            continue
        v = x.get("median_s")
        failed = bool(x.get("returncode")) or v is None or v != v
        rows.append(
            (
                text,
                f"≤ {limit:g} s",
                f"{v:.3f} s" + (" (failed)" if failed else "") if v is not None else "–",
                _ok(not failed and v is not None and v <= limit),
            )
        )
    lines = ["| Figure | Target | Where we stand | |", "|---|---|---|---|"]
    lines += [f"| {t} | {g} | {v} | {o} |" for t, g, v, o in rows]
    return lines


API_TEXT = "from retinue import run, RunConfig, ToolRegistry, tool"


def _loads(r: dict[str, Any]) -> str:
    loads = [x[0] for x in r["overhead"].get("loads", []) if x]
    end = r["meta"].get("load_at_end") or []
    if end:
        loads.append(end[0])
    if not loads:
        return "not recorded"
    return f"{min(loads):.2f}–{max(loads):.2f} (1-minute average, at each round and at the end)"


def _section(fragment: str) -> str:
    """A Markdown fragment as a section of its own (its first heading made a ``##`` one)."""
    text = fragment.strip()
    if text.startswith("#"):
        heading, _, rest = text.partition("\n")
        text = "## " + heading.lstrip("#").strip() + "\n" + rest
    return text


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


def _upgrade(r: dict[str, Any]) -> None:
    """Result files written before wall and CPU were both kept hold one wall figure per
    cell: read them as ``{"wall": v, "cpu": None}`` (``--report-only`` over old files)."""

    def cells(table: dict[str, Any]) -> None:
        for label, v in list(table.items()):
            if isinstance(v, int | float):
                table[label] = {"wall": v, "cpu": None}

    for entry in r["overhead"]["summary"].values():
        for variant in ("inproc", "loopback"):
            cells(entry.get(variant, {}))
        for table in entry.get("refs", {}).values():
            cells(table)


def render(r: dict[str, Any]) -> str:
    _upgrade(r)
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
        f"- Machine load during the run: {_loads(r)}. The machine is shared: absolute times "
        "are noisy, which is why every ratio is taken within one round.",
        "- Versions: " + ", ".join(f"{k} {v}" for k, v in m["versions"].items()),
        f"- Method: {p.get('rounds')} interleaved rounds (order rotated each round), each a fresh "
        f"process per framework running {p.get('repeats')} timed repeats after one warm-up. "
        "A ratio is computed within each round (Retinue and the fastest peer of that round; "
        "Retinue and the floor of that round, their runs alternated, the median of "
        f"{p.get('pairs', 1)} pairs' ratios) and reported as the median of the rounds "
        "(min–max in brackets). Times are wall / CPU (`time.process_time`, the benchmark "
        "process's every thread; the loopback server runs in the runner's process). Every "
        "seeded history is built before the clock starts, and every fake model (Retinue's and "
        "the peers') is async and reports a usage figure.",
        "",
        "## Targets and where we stand",
        "",
        *targets(r),
        "",
        "## 1a. Engine overhead per model round trip, in process",
        "",
        "Each framework's own fake model (Retinue `ScriptedModel`, openai-agents a `Model` "
        "subclass, pydantic-ai `FunctionModel` with an async function, LangGraph a minimal "
        "`BaseChatModel` with `_agenerate`); each turn the model asks for one no-op tool (a "
        "plain `def` in every framework, so each runs it in a worker thread; a tool this "
        "quick Retinue waits for on the loop's thread, not through the event loop), the last "
        "turn answers.",
        "",
        *overhead_table(r, "inproc"),
        "",
        "## 1b. Over loopback HTTP (one shared OpenAI-compatible server)",
        "",
        "Every framework talks Chat Completions to the same `LoopbackOpenAIServer` "
        "(keep-alive, Nagle off, answers from a stateless scripted responder).",
        "",
        *overhead_table(r, "loopback"),
        "",
    ]
    if "refs" in ret:
        out += [
            "References on the same server (same request bodies Retinue sends; medians of "
            "the rounds), and Retinue's own figures:",
            "",
            *refs_table(r),
            "",
            "Retinue against the floor (a bare keep-alive `http.client` loop posting the "
            "same bodies, ready-encoded), ratio per round (each round's the median of its "
            "alternated Retinue and floor runs' ratios):",
            "",
            *floor_table(r),
            "",
            "Retinue sends a non-streaming request to a plain-HTTP server over its own lean "
            "kept-alive HTTP/1.1 POST (`retinue/llm/_http11.py`): one write of ready bytes, "
            "the answer read with one bounded header parse; anything but a complete `200` goes "
            "to the `openai` SDK, which makes the remaining retries and maps errors as before "
            "(HTTPS and proxies are always the SDK's). Request bodies are joined from each "
            "message's JSON, encoded once and kept (bounded cache), so building a request "
            "costs the new messages, not the whole history.",
            "",
        ]
    dg = ret["delegation"]
    out += ["## 2. Sub-agent delegation overhead (20 delegations, in process)", ""]
    out += ["| ms per delegation | |", "|---|---|"]
    out.append(f"| Retinue interactive (one session, growing history) | {_ms(dg['interactive'])} |")
    out.append(f"| Retinue one-shot (fresh conversation each time) | {_ms(dg['one_shot'])} |")
    agents = s.get("openai-agents", {}).get("delegation_as_tool")
    out.append(f"| openai-agents `Agent.as_tool` | {_ms(agents)} |")
    if agents:
        ratio = _x(dg["interactive"] / agents)
        out.append(f"| Retinue interactive / as_tool (medians, wall) | {ratio} |")
    b = r.get("blocking")
    if b:
        out += [
            "",
            "## 2b. A blocking synchronous tool does not stall the other sessions",
            "",
            f"`blocking.py`: {b['sessions']} concurrent runs each call one plain `def` tool that "
            f"blocks for {b['block_ms']:.0f} ms (`time.sleep`). Plain tools run in a pool of "
            f"{b['threads']} threads (`min(32, CPUs + 4)`); `async def` tools run on the loop.",
            "",
            "| | |",
            "|---|---|",
            f"| wall time | {b['wall_s']:.3f} s |",
            f"| what the pool allows (⌈{b['sessions']} / {b['threads']}⌉ × {b['block_ms']:.0f} ms)"
            f" | {b['ideal_wall_s']:.3f} s |",
            f"| inline on the event loop ({b['sessions']} × {b['block_ms']:.0f} ms) "
            f"| {b['inline_wall_s']:.3f} s |",
            f"| longest event-loop stall (a {b['probe_ms']:.0f} ms sleep loop, {b['probes']} "
            f"wake-ups) | {b['max_lag_ms']:.1f} ms |",
            f"| load average at the time | {', '.join(f'{x:.2f}' for x in b.get('load', []))} |",
        ]
    out += ["", "## 3. Interactive sessions at scale (5 turns each, 20 ms simulated latency)", ""]
    repeats = sorted({x.get("repeats", 1) for x in r["sessions"]})
    rounds = (r["meta"].get("params") or {}).get("session_rounds", 1)
    if repeats[-1:] > [1]:
        said = " or ".join(str(k) for k in repeats)
        out += [
            f"Each row: {rounds} rounds, a fresh process each, the scales taking turns (a slow "
            "stretch of the shared machine falls on every scale alike); the row is the round "
            f"whose median run is the median of the rounds' ({said} runs in all: the runs under "
            "10,000 sessions, a few tenths of a second each, are repeated more; every run's CPU "
            "per call is in `results/bench_sessions.json`); peak RSS growth is the first "
            "round's.",
            "",
        ]
    out += [
        "| sessions | model calls | wall s | calls/s | ideal calls/s | CPU µs per call "
        "| full GC collections | peak RSS growth MiB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for x in r["sessions"]:
        cpu = x.get("cpu_us_per_call")
        label = _MODE_LABEL.get(_mode(x), "")
        out.append(
            f"| {x['sessions']:,}{label} | {x['model_calls']:,} | {x['wall_s']:.2f} "
            f"| {x['calls_per_s']:,.0f} | {x['ideal_calls_per_s']:,.0f} "
            f"| {f'{cpu:.0f}' if cpu is not None else '–'} | {x.get('full_collections', '–')} "
            f"| {x['rss_growth_peak_mib']:.1f} |"
        )
    out += [
        "",
        "What grows with the number of sessions is the cyclic garbage collector's work: every "
        "turn in flight holds a few dozen container objects (coroutines, futures, callbacks) "
        "that outlive a young-generation collection, so with thousands of turns in flight "
        "they are promoted and trigger full collections, each of which walks every live "
        "session. The rows with the collector off show the runtime's own cost per call. "
        "`retinue serve` owns its process and raises the young-generation threshold to "
        "10,000 (`retinue/engine/collector.py`): most turns then finish before a collection "
        "sees them; a program that embeds the library keeps Python's settings unless it "
        "calls `retinue.tune_for_serving()` itself.",
    ]
    i = r["idle"]
    beyond = i.get("beyond_messages_per_session")
    out += [
        "",
        f"Idle sessions ({i['sessions']:,}, each with a {i['history_turns']}-turn history, "
        f"{i['messages_per_session']:.0f} messages), measured with tracemalloc:",
        "",
        f"- memory held per idle session: {i['bytes_per_session']:,.0f} B; UTF-8 size of its "
        f"messages: {i['message_bytes_per_session']:,.0f} B; ratio **{i['ratio']:.2f}×**",
    ]
    if beyond is not None:
        out.append(
            f"- its history's own objects (the message list, the message records, their "
            f"strings): {i['message_objects_per_session']:,.0f} B; everything else the session "
            f"holds (session, run config, tool registry, context, hooks, registry entries): "
            f"**{beyond:,.0f} B**"
        )
    out += [
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
        "`first_request`: from starting `retinue run` (a fresh data directory) to its first "
        "request arriving at a loopback OpenAI-compatible server (its CPU figure is the whole "
        "run's). The processes keep Python's compiled bytecode, as on a user's machine "
        "(`PYTHONDONTWRITEBYTECODE` is cleared for them).",
        "",
        "| command | median s (wall) | min s | CPU s (median) | status |",
        "|---|---|---|---|---|",
    ]
    nan = float("nan")
    for x in r["startup"].values():
        if not isinstance(x, dict):
            continue  # the load average
        status = (
            "ok"
            if not x.get("returncode") and not x.get("error")
            else f"failed: {' '.join(x.get('error', []))}"
        )
        out.append(
            f"| `{x['command']}` | {x.get('median_s', nan):.3f} | {x.get('min_s', nan):.3f} "
            f"| {x.get('cpu_s', nan):.3f} | {status} |"
        )
    others = dict(r.get("others") or {})
    if "lifecycle_fuzz" in others:
        out += ["", *lifecycle_section(others.pop("lifecycle_fuzz"))]
    out += ["", *local_section(others)]
    for key in [k for k in others if k.endswith(".md")]:  # a colleague's own section
        others.pop(key.removesuffix(".md"), None)  # (its JSON is shown by its fragment)
        out += ["", _section(others.pop(key))]
    if others:
        out += ["", "## Other benchmarks in this folder (their own result files)", ""]
        for name, data in others.items():
            keys = ", ".join(list(data)[:8]) if isinstance(data, dict) else type(data).__name__
            out.append(f"- `results/{name}.json` (see its script): {keys}")
    out.append("")
    return "\n".join(out)
