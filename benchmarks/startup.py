"""Start-up wall time (issues 7 and 19): imports, ``retinue --help``, and the time from
``retinue run`` to its first model request.

Each command runs ``repeats`` times as a fresh process (after one warm-up run that fills the
OS file cache); the median wall time is reported, with the exit status of the last run (a CLI
that does not work yet is recorded as such, not hidden). The imports timed are the package,
the public API a script uses (``from retinue import run, RunConfig, ToolRegistry, tool``) and
the OpenAI provider. ``first_request``: ``retinue run`` starts against a loopback
OpenAI-compatible server in this process, which notes the moment the request arrives; the
figure is that moment minus the moment the process was started (a fresh data directory each
time, so no memory or config is found).

Run alone: ``uv run python benchmarks/startup.py [--repeats 7]``.
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


def time_command(argv: list[str], repeats: int) -> dict[str, Any]:
    _run(argv, ENV)
    runs = [_run(argv, ENV) for _ in range(repeats)]
    last = runs[-1][2]
    return {
        "command": " ".join(Path(a).name if i == 0 else a for i, a in enumerate(argv)),
        "median_s": median([r[0] for r in runs]),
        "min_s": min(r[0] for r in runs),
        "cpu_s": median([r[1] for r in runs]),
        "returncode": last.returncode,
        "error": last.stderr.decode(errors="replace").strip().splitlines()[-1:]
        if last.returncode
        else [],
    }


def first_request(cli: str, repeats: int) -> dict[str, Any]:
    """Seconds from starting ``retinue run`` to its first request reaching the model server."""
    arrivals: list[float] = []

    def answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> ModelResponse:
        arrivals.append(time.perf_counter())
        return ModelResponse(AssistantMessage("done"), Usage(100, 1, 0, 1), "stop")

    def once(server: LoopbackOpenAIServer) -> tuple[float, float, int, str]:
        with tempfile.TemporaryDirectory() as home:
            env = {
                **ENV,
                "RETINUE_HOME": home,
                "OPENAI_BASE_URL": server.base_url,
                "OPENAI_API_KEY": "bench",
            }
            argv = [cli, "run", "-q", "-m", "openai:bench", "-w", home, "say done"]
            arrivals.clear()
            started = time.perf_counter()
            _wall, cpu, done = _run(argv, env)
            first = arrivals[0] - started if arrivals else float("nan")
            return first, cpu, done.returncode, done.stderr.decode(errors="replace").strip()

    with LoopbackOpenAIServer(ScriptedModel(responder=answer, record=False)) as server:
        once(server)
        runs = [once(server) for _ in range(repeats)]
    last = runs[-1]
    return {
        "command": "retinue run (to its first model request)",
        "median_s": median([r[0] for r in runs]),
        "min_s": min(r[0] for r in runs),
        "cpu_s": median([r[1] for r in runs]),  # the whole run, not only to the request
        "returncode": last[2],
        "error": last[3].splitlines()[-1:] if last[2] else [],
    }


def measure(repeats: int) -> dict[str, Any]:
    python = sys.executable
    cli = shutil.which("retinue", path=str(Path(python).parent)) or shutil.which("retinue")
    out: dict[str, Any] = {
        "python_baseline": time_command([python, "-c", "pass"], repeats),
        "import_retinue": time_command([python, "-c", "import retinue"], repeats),
        "import_api": time_command([python, "-c", API], repeats),
        "import_openai_provider": time_command(
            [python, "-c", "import retinue.llm.openai"], repeats
        ),
    }
    if cli:
        out["retinue_help"] = time_command([cli, "--help"], repeats)
        out["first_request"] = first_request(cli, repeats)
    else:
        out["retinue_help"] = {"command": "retinue --help", "error": ["no retinue script"]}
    out["load"] = load_average()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description="Retinue start-up time")
    parser.add_argument("--repeats", type=int, default=7)
    emit_json(measure(parser.parse_args().repeats))


if __name__ == "__main__":
    main()
