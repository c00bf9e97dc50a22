"""Start-up wall time (issue 7, figure 5): ``python -c "import retinue"`` and ``retinue --help``.

Each command runs ``repeats`` times as a fresh process (after one warm-up run that fills the
OS file cache); the median wall time is reported, with the exit status of the last run (a CLI
that does not work yet is recorded as such, not hidden).

Run alone: ``uv run python benchmarks/startup.py [--repeats 7]``.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _common import emit_json, median


def time_command(argv: list[str], repeats: int) -> dict[str, Any]:
    def once() -> tuple[float, subprocess.CompletedProcess[bytes]]:
        started = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, timeout=60, check=False)
        return time.perf_counter() - started, done

    once()
    runs = [once() for _ in range(repeats)]
    last = runs[-1][1]
    return {
        "command": " ".join(Path(a).name if i == 0 else a for i, a in enumerate(argv)),
        "median_s": median([r[0] for r in runs]),
        "min_s": min(r[0] for r in runs),
        "returncode": last.returncode,
        "error": last.stderr.decode(errors="replace").strip().splitlines()[-1:]
        if last.returncode
        else [],
    }


def measure(repeats: int) -> dict[str, Any]:
    python = sys.executable
    cli = shutil.which("retinue", path=str(Path(python).parent)) or shutil.which("retinue")
    out = {
        "python_baseline": time_command([python, "-c", "pass"], repeats),
        "import_retinue": time_command([python, "-c", "import retinue"], repeats),
    }
    if cli:
        out["retinue_help"] = time_command([cli, "--help"], repeats)
    else:
        out["retinue_help"] = {"command": "retinue --help", "error": ["no retinue script"]}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description="Retinue start-up time")
    parser.add_argument("--repeats", type=int, default=7)
    emit_json(measure(parser.parse_args().repeats))


if __name__ == "__main__":
    main()
