"""Start-up wall time (issues 7 and 19): imports, ``retinue --help``, and the time from
``retinue run`` to its first model request.

Each command runs ``repeats`` times as a fresh process, the commands taking turns (after one
warm-up round that fills the OS file cache); the median wall time is reported, with the exit
status of the last run (a CLI that does not work yet is recorded as such, not hidden). The
imports timed are the package, the public API a script uses (``from retinue import run,
RunConfig, ToolRegistry, tool``) and the OpenAI provider. ``first_request``: ``retinue run``
starts against a loopback OpenAI-compatible server in this process, which notes the moment
the request arrives; the figure is that moment minus the moment the process was started (a
fresh data directory each time, so no memory or config is found).

Run alone: ``uv run python benchmarks/startup.py [--repeats 11]``.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _common import emit_json, load_average, median

from retinue.llm.base import ModelResponse, ToolSpec
from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.messages import AssistantMessage, Message, Usage
from retinue.testing import ScriptedModel

API = "from retinue import run, RunConfig, ToolRegistry, tool"
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _child_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def _run(
    argv: list[str], env: dict[str, str]
) -> tuple[float, float, subprocess.CompletedProcess[bytes]]:
    """Wall and CPU seconds of one run of ``argv``, and how it ended."""
    cpu, started = _child_cpu(), time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, timeout=60, check=False)
    return time.perf_counter() - started, _child_cpu() - cpu, done


def summary(command: str, runs: Sequence[tuple[float, float, int, str]]) -> dict[str, Any]:
    """Median wall and CPU seconds of ``runs`` (wall, CPU, exit status, stderr), with the
    last run's exit status (a command that does not work is recorded as such, not hidden)."""
    last = runs[-1]
    return {
        "command": command,
        "median_s": median([r[0] for r in runs]),
        "min_s": min(r[0] for r in runs),
        "cpu_s": median([r[1] for r in runs]),
        "returncode": last[2],
        "error": last[3].splitlines()[-1:] if last[2] else [],
    }


def run_command(argv: list[str]) -> tuple[float, float, int, str]:
    wall, cpu, done = _run(argv, ENV)
    return wall, cpu, done.returncode, done.stderr.decode(errors="replace").strip()


def first_request(cli: str, server: LoopbackOpenAIServer) -> tuple[float, float, int, str]:
    """Seconds from starting ``retinue run`` to its first request reaching ``server`` (and
    the whole run's CPU seconds, exit status, stderr)."""
    with tempfile.TemporaryDirectory() as home:
        env = {
            **ENV,
            "RETINUE_HOME": home,
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": "bench",
        }
        argv = [cli, "run", "-q", "-m", "openai:bench", "-w", home, "say done"]
        _ARRIVALS.clear()
        started = time.perf_counter()
        _wall, cpu, done = _run(argv, env)
        first = _ARRIVALS[0] - started if _ARRIVALS else float("nan")
        return first, cpu, done.returncode, done.stderr.decode(errors="replace").strip()


_ARRIVALS: list[float] = []


def _answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
    _ARRIVALS.append(time.perf_counter())
    return ModelResponse(AssistantMessage("done"), Usage(100, 1, 0, 1), "stop")


def measure(repeats: int) -> dict[str, Any]:
    """Every command ``repeats`` times, in rounds (one run of each per round, after a round
    that warms the OS file cache): a stretch of time when the shared machine is slow falls on
    every command alike, not on one of them."""
    python = sys.executable
    cli = shutil.which("retinue", path=str(Path(python).parent)) or shutil.which("retinue")
    commands = {
        "python_baseline": [python, "-c", "pass"],
        "import_retinue": [python, "-c", "import retinue"],
        "import_api": [python, "-c", API],
        "import_openai_provider": [python, "-c", "import retinue.llm.openai"],
    }
    if cli:
        commands["retinue_help"] = [cli, "--help"]
    runs: dict[str, list[tuple[float, float, int, str]]] = {k: [] for k in commands}
    firsts: list[tuple[float, float, int, str]] = []
    with LoopbackOpenAIServer(ScriptedModel(responder=_answer, record=False)) as server:
        for r in range(repeats + 1):
            for name, argv in commands.items():
                outcome = run_command(argv)
                if r:  # round 0 warms up
                    runs[name].append(outcome)
            if cli:
                outcome = first_request(cli, server)
                if r:
                    firsts.append(outcome)
    out: dict[str, Any] = {
        name: summary(
            " ".join(Path(a).name if i == 0 else a for i, a in enumerate(argv)), runs[name]
        )
        for name, argv in commands.items()
    }
    if cli:
        out["first_request"] = summary("retinue run (to its first model request)", firsts)
        out["first_request"]["cpu_note"] = "the whole run, not only to the request"
    else:
        out["retinue_help"] = {"command": "retinue --help", "error": ["no retinue script"]}
    out["load"] = load_average()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description="Retinue start-up time")
    parser.add_argument("--repeats", type=int, default=11)
    emit_json(measure(parser.parse_args().repeats))


if __name__ == "__main__":
    main()
