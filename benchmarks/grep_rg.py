"""Grep against ripgrep itself, on a tree of at least 40,000 files (issue 42, item 4a).

The tree is made under ``/tmp`` (``--tree``) by copying the files of up to 512 KB from the
Python environments here (this project's ``.venv``, ``benchmarks/.venv-peers``, the system's
``/usr/lib/python3*``) into ``env0_0/``, ``env0_1/``... (and ``env1_*`` again when they hold
too few): source, data and a few binaries, as a large checkout holds. Copies, not hard links
(Grep skips those); nothing hidden and no ``__pycache__`` / ``node_modules``, so that bare
``rg`` and Grep search the same files.

Each round times, for each pattern, in rotating order:

- ``grep``: the ``Grep`` tool called through a ``ToolRegistry`` (default mode,
  ``files_with_matches``; and ``content`` for the literal), the whole call: opening, ``rg``,
  the second look at each reported file, sorting by mtime;
- ``rg``: bare ``rg -l -e PATTERN`` (``rg -n`` for content) in the tree, the wheel's binary,
  its defaults: the reference the target is set against (Grep at most 1.5x its time);
- ``rg_argv``: ``rg`` with Grep's own flags (``--hidden``, the skipped folders...), to show
  what the flags cost and what the Python side costs.

The same script measures the Python search Grep used before: run it with ``PYTHONPATH``
pointing at an older ``src`` (``git archive c8363a0 src | tar -x -C /tmp/before``) and
``--label before``; then ``rg_argv`` is skipped (that code has no ``rg``).

    uv run python benchmarks/grep_rg.py --label after
    PYTHONPATH=/tmp/before/src uv run python benchmarks/grep_rg.py --label before --rounds 2

Prints one JSON line and writes ``benchmarks/results/grep_rg_<label>.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import retinue
from retinue.messages import ToolCall
from retinue.tools import ToolContext, ToolRegistry
from retinue.tools.builtin import grep_tool, search

HERE = Path(__file__).resolve().parent
SOURCES = [
    HERE.parent / ".venv" / "lib",
    HERE / ".venv-peers" / "lib",
    *sorted(Path("/usr/lib").glob("python3*")),
]
PATTERNS = {
    "literal": ("def __init__", "files_with_matches"),
    "literal_content": ("raise NotImplementedError", "content"),
    "regex": (r"def \w+_cache\(", "files_with_matches"),
    "alternation": ("(foo|bar)+baz", "files_with_matches"),
}
MAX_BYTES = 512 * 1024


def _searched(name: str) -> bool:
    """Whether both bare ``rg`` and Grep search an entry of this name (so both do the same
    work): not hidden, not a folder Grep skips."""
    return not name.startswith(".") and name not in ("__pycache__", "node_modules")


def make_tree(tree: Path, want: int) -> int:
    """Copy files into ``tree`` until it holds ``want``; how many it holds."""
    marker = tree / ".made"
    if marker.exists():
        return int(marker.read_text())
    shutil.rmtree(tree, ignore_errors=True)
    count = 0
    for round_ in range(10):  # (copies again under envN/ when the sources hold too few)
        for i, src in enumerate(s for s in SOURCES if s.is_dir()):
            for dirpath, dirnames, names in os.walk(src):
                dirnames[:] = sorted(d for d in dirnames if _searched(d))
                rel = Path(dirpath).relative_to(src)
                for name in sorted(filter(_searched, names)):
                    path = Path(dirpath) / name
                    try:
                        if path.is_symlink() or path.stat().st_size > MAX_BYTES:
                            continue
                    except OSError:
                        continue
                    dest = tree / f"env{round_}_{i}" / rel / name
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    try:
                        shutil.copyfile(path, dest)
                    except OSError:
                        continue
                    count += 1
                    if count >= want:
                        marker.write_text(str(count))
                        return count
    marker.write_text(str(count))
    return count


def rg_path() -> str:
    found = shutil.which("rg", path=str(HERE.parent / ".venv" / "bin"))
    if found is None:
        raise SystemExit("the ripgrep wheel's rg is missing: uv sync")
    return found


def _cpu() -> float:
    """CPU seconds (user + system) of this process and its finished children so far."""
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def time_cmd(argv: list[str], cwd: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one command."""
    cpu, started = _cpu(), time.perf_counter()
    subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, check=False)
    return time.perf_counter() - started, _cpu() - cpu


def grep_argv(pattern: str, mode: str) -> list[str] | None:
    """``rg`` with Grep's own flags, when this Retinue runs ``rg``."""
    try:
        from retinue.tools.builtin import _ripgrep
    except ImportError:
        return None
    q = _ripgrep.Query(pattern, False, False, None, (), mode, 0, 0, True, 250)
    return _ripgrep.rg_argv(rg_path(), q, ".")


async def time_grep(
    registry: ToolRegistry, ctx: ToolContext, pattern: str, mode: str
) -> tuple[float, float]:
    """Wall and CPU seconds (this process and its child) of one Grep call."""
    args = json.dumps({"pattern": pattern, "output_mode": mode})
    cpu, started = _cpu(), time.perf_counter()
    result = await registry.execute(ToolCall("c", "Grep", args), ctx)
    took = time.perf_counter() - started, _cpu() - cpu
    if result.is_error:
        raise SystemExit(f"Grep failed: {result.content[:300]}")
    return took


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tree", type=Path, default=Path("/tmp/retinue_grep_tree"))
    parser.add_argument("--files", type=int, default=40_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--label", default="after")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    parser.add_argument("--timeout", type=float, default=600.0, help="Grep's own time limit")
    opts = parser.parse_args()
    search.GREP_TIMEOUT_S = opts.timeout  # (the default 30 s stops the Python search here)
    files = make_tree(opts.tree, opts.files)
    size = sum(p.stat().st_size for p in opts.tree.rglob("*") if p.is_file())
    rg = rg_path()
    registry = ToolRegistry([grep_tool])
    ctx = ToolContext(
        agent_id="bench", workspace=opts.tree, data_dir=Path("/tmp/retinue_grep_data")
    )
    times: dict[str, dict[str, list[tuple[float, float]]]] = {k: {} for k in PATTERNS}
    for _ in range(2):  # warm the page cache
        time_cmd([rg, "-l", "-e", "zzz_never", "."], opts.tree)
    for r in range(opts.rounds):
        names = list(PATTERNS)
        names = names[r % len(names) :] + names[: r % len(names)]
        for name in names:
            pattern, mode = PATTERNS[name]
            flag = "-l" if mode == "files_with_matches" else "-n"
            runs: dict[str, list[str]] = {"rg": [rg, flag, "-e", pattern, "."]}
            argv = grep_argv(pattern, mode)
            if argv is not None:
                runs["rg_argv"] = argv
            order = [*runs, "grep"]
            order = order[r % len(order) :] + order[: r % len(order)]
            for what in order:
                if what == "grep":
                    took = await time_grep(registry, ctx, pattern, mode)
                else:
                    took = time_cmd(runs[what], opts.tree)
                times[name].setdefault(what, []).append(took)
    figures = {}
    for name, by in times.items():
        wall = {what: statistics.median(w for w, _ in ts) for what, ts in by.items()}
        cpu = {what: statistics.median(c for _, c in ts) for what, ts in by.items()}
        figures[name] = {
            "pattern": PATTERNS[name][0],
            "mode": PATTERNS[name][1],
            **{f"{what}_s": round(m, 4) for what, m in wall.items()},
            **{f"{what}_cpu_s": round(m, 4) for what, m in cpu.items()},
            **{f"{what}_runs": [round(w, 4) for w, _ in ts] for what, ts in by.items()},
            "ratio_grep_to_rg": round(wall["grep"] / wall["rg"], 2),
            "cpu_ratio_grep_to_rg": round(cpu["grep"] / cpu["rg"], 2),
        }
    out = {
        "label": opts.label,
        "retinue": str(Path(retinue.__file__).parent),
        "files": files,
        "bytes": size,
        "rounds": opts.rounds,
        "cpus": os.cpu_count(),
        "load": os.getloadavg(),
        "python": sys.version.split()[0],
        "figures": figures,
    }
    opts.out.mkdir(parents=True, exist_ok=True)
    (opts.out / f"grep_rg_{opts.label}.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main())
