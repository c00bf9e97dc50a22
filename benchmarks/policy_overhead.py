"""What the permission gate adds to a turn (issue 26: at most +5% with no rules, +20% with 50).

The in-process scenario of ``overhead.py`` (``ScriptedModel`` answering at once, 100 turns
of a no-op plain tool), timed three ways, alternated run by run so that each sees the same
moment of a shared machine:

- ``none``: no gate on the context (the library's default, or any policy that lets
  everything run);
- ``default``: the CLI's gate, mode ``default``, no rules (the tool is the program's own, so
  the mode allows it: every call is decided, none asks);
- ``rules50``: the same with 50 rules (allow / ask / deny of Bash, path and domain kinds),
  none of which names the tool (the gate finds that once per tool name);
- ``rules50_named``: 50 rules, one of which allows the tool by name: every call's arguments
  are parsed and checked against all 50, as a ``Bash`` call is.

Run: ``uv run python benchmarks/policy_overhead.py [--rounds N]``; writes
``benchmarks/results/policy_overhead.json`` and prints it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from dataclasses import replace
from pathlib import Path
from statistics import median
from typing import Any

from _common import FINAL, TOOL_NAME, load_average, timed
from overhead import inproc_model, noop, seeded, task_text

from retinue.engine import RunConfig, run
from retinue.llm.base import Model
from retinue.policy.gate import Policy
from retinue.policy.rules import RuleSet
from retinue.tools import ToolContext, ToolRegistry

TURNS = 100
RESULT = Path(__file__).parent / "results" / "policy_overhead.json"


def fifty_rules(workspace: Path, *, named: bool = False) -> RuleSet:
    rules = RuleSet()
    rules.add("deny", [f"Bash(rm -rf /{i}:*)" for i in range(10)], workspace)
    rules.add("deny", [f"Read(./secrets{i}/**)" for i in range(10)], workspace)
    rules.add("ask", [f"WebFetch(domain:site{i}.example)" for i in range(10)], workspace)
    rules.add("allow", [f"Bash(npm run task{i}:*)" for i in range(10)], workspace)
    rules.add("allow", [f"Edit(src/pkg{i}/**)" for i in range(9)], workspace)
    rules.add("allow", [TOOL_NAME if named else "mcp__github__get_issue"], workspace)
    assert len(rules.allow) + len(rules.ask) + len(rules.deny) == 50
    return rules


async def one_run(model: Model, gate: Policy | None, run_no: int) -> tuple[float, float]:
    ctx = ToolContext("bench", Path.cwd(), Path.cwd(), gate=gate)
    config = RunConfig(
        model,
        seeded(0, task_text(TURNS, 0, run_no)),
        ToolRegistry([noop]),
        replace(ctx),
        max_iterations=TURNS + 5,
        repeat_limit=None,  # the scenario's no-op call is the same every turn, by design
    )
    out, wall, cpu = await timed(run(config))
    if out.iterations != TURNS or out.content != FINAL:
        raise RuntimeError(f"run went wrong: {out.iterations} turns, {out.content!r}")
    return wall / TURNS * 1000, cpu / TURNS * 1000  # microseconds per turn


async def measure(rounds: int) -> dict[str, Any]:
    model = inproc_model()
    variants: dict[str, Policy | None] = {
        "none": None,
        "default": Policy(modes=("default",)),
        "rules50": Policy(modes=("default",), rules=fifty_rules(Path.cwd())),
        "rules50_named": Policy(modes=("default",), rules=fifty_rules(Path.cwd(), named=True)),
    }
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
    for gate in variants.values():  # warm-up
        await one_run(model, gate, -1)
    for k in range(rounds):
        order = list(variants) if k % 2 == 0 else list(reversed(variants))
        for name in order:
            times[name].append(await one_run(model, variants[name], k))
    out: dict[str, Any] = {"turns": TURNS, "rounds": rounds, "load": load_average()}
    base_cpu = median(c for _, c in times["none"])
    base_wall = median(w for w, _ in times["none"])
    for name, runs in times.items():
        cpu, wall = median(c for _, c in runs), median(w for w, _ in runs)
        out[name] = {
            "cpu_us_per_turn": round(cpu, 1),
            "wall_us_per_turn": round(wall, 1),
            "cpu_ratio": round(cpu / base_cpu, 3),
            "wall_ratio": round(wall / base_wall, 3),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description="What the permission gate adds to a turn")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    result = asyncio.run(measure(args.rounds))
    RESULT.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
