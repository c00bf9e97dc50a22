"""What confinement costs per command (issue 38): a ``Bash`` call and a hook, each ``true``.

Five ways of starting one command, alternated round by round so that each sees the same
moment of a shared machine; wall time and CPU (the children's user + system time) per start:

- ``plain``: ``bash -c true``, no sandbox (what an unsandboxed command or a trusted hook paid
  before);
- ``lifetime``: :func:`~retinue.tools.builtin.sandbox.lifetime_wrap`, a PID namespace of its
  own only (a hook or server the user trusts to run outside the sandbox);
- ``sandbox``: the ``Bash`` tool's sandbox (:meth:`Sandbox.argv`), a user namespace, no
  capabilities, the workspace's protected paths read-only (a workspace with ``.git``);
- ``sandbox_net``: the same with the host's network (:meth:`Sandbox.wrap`, as a confined MCP
  server or hook starts);
- ``sandbox_rules``: the sandbox with deny rules turned into mounts: two Read and one Edit
  deny rule, one of them a bare name (``*.env``) that walks a workspace of ``FILES`` files.

Run: ``uv run python benchmarks/confinement.py [--rounds N]``; writes
``benchmarks/results/confinement.json`` and prints it. Needs bubblewrap.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from statistics import median

from _common import load_average

from retinue.policy.confine import rule_paths
from retinue.policy.rules import RuleSet
from retinue.tools.builtin.sandbox import (
    Sandbox,
    bwrap_problem,
    confinement,
    lifetime_wrap,
    safe_environment,
)

RESULT = Path(__file__).parent / "results" / "confinement.json"
FILES = 2_000


def _children_cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def _timed(argv: list[str], cwd: Path) -> tuple[float, float]:
    """Wall and CPU seconds to start ``argv`` and see it end."""
    cpu, wall = _children_cpu(), time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=safe_environment(os.environ), check=True,
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)  # fmt: skip
    return time.perf_counter() - wall, _children_cpu() - cpu


def _workspace(root: Path) -> Path:
    ws = root / "ws"
    for i in range(FILES):
        folder = ws / f"d{i % 40}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{i}.txt").write_text("x")
    (ws / "secrets").mkdir()
    (ws / "secrets" / "key").write_text("k")
    (ws / "d3" / "app.env").write_text("e")
    subprocess.run(["git", "init", "-q", str(ws)], check=False, capture_output=True)
    return ws


def _ways(ws: Path, data: Path) -> dict[str, Callable[[], list[str]]]:
    rules = RuleSet()
    rules.add("deny", ["Read(./secrets/**)", "Read(*.env)", "Edit(./d1/**)"], ws)
    box = Sandbox.for_workspace(ws, data)

    def with_rules() -> list[str]:
        found = rule_paths(rules.deny, ws)
        return replace(box, denied=found.hidden, read_only=found.read_only).argv("true")

    return {
        "plain": lambda: ["bash", "-c", "true"],
        "lifetime": lambda: lifetime_wrap(["bash", "-c", "true"]),
        "sandbox": lambda: box.argv("true"),
        "sandbox_net": lambda: box.wrap(["bash", "-c", "true"], network=True),
        "sandbox_rules": with_rules,
    }


def measure(rounds: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
        ws = _workspace(Path(tmp))
        data = Path(tmp) / "data"
        ways = _ways(ws, data)
        walls: dict[str, list[float]] = {name: [] for name in ways}
        cpus: dict[str, list[float]] = {name: [] for name in ways}
        for _ in range(rounds):
            for name, argv in ways.items():
                wall0 = time.perf_counter()
                args = argv()  # building the command line (and the rules' walk) counts
                build = time.perf_counter() - wall0
                wall, cpu = _timed(args, ws)
                if name.startswith("sandbox"):
                    Sandbox.for_workspace(ws, data).release()  # (counted per workspace)
                walls[name].append(wall + build)
                cpus[name].append(cpu + build)
    base_wall, base_cpu = median(walls["plain"]), median(cpus["plain"])
    return {
        "rounds": rounds,
        "files_in_workspace": FILES,
        "confinement": confinement().describe(),
        "load_average": load_average(),
        "per_start": {
            name: {
                "wall_ms": round(median(walls[name]) * 1000, 2),
                "cpu_ms": round(median(cpus[name]) * 1000, 2),
                "wall_x_plain": round(median(walls[name]) / base_wall, 2),
                "cpu_x_plain": round(median(cpus[name]) / base_cpu, 2),
            }
            for name in ways
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=31)
    args = parser.parse_args()
    if (problem := bwrap_problem()) is not None:
        sys.exit(f"no sandbox here: {problem}")
    result = measure(args.rounds)
    RESULT.parent.mkdir(exist_ok=True)
    RESULT.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
