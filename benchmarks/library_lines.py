"""Lines of code of everyday library tasks: Retinue beside the best peer, measured.

Each task is written once for Retinue (``side_by_side/retinue/``) and once for each peer
that does it best (``side_by_side/peers/``: pydantic-ai, and the OpenAI Agents SDK where it
is the stronger one). Every program runs on a test model and checks what it did. Only the
task is counted: the lines between ``# --8<-- [start:task]`` and ``[end:task]``, not blank, not a
comment, and not a line marked ``# (not counted``: the scripted model and the checks around
it are left out on both sides. Each program is also run once (Retinue's with this
project's Python, the peers' with ``benchmarks/.venv-peers``, made from
``requirements-peers.txt``) and its pass/fail recorded.

    uv run python benchmarks/library_lines.py          # count and run, write the results
    uv run python benchmarks/library_lines.py --no-run # count only

It writes ``results/library_lines.json`` and ``results/library_lines.md`` (the table that
``docs/explanation/side-by-side.md`` quotes; ``tests/library/test_side_by_side.py`` checks
that the page's table is the one this script makes).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
SIDE = HERE / "side_by_side"
PEERS_PYTHON = HERE / ".venv-peers" / "bin" / "python"
RESULTS = HERE / "results"
START = "# --8<-- [start:task]\n"  # the task's bounds, which the docs page includes too
END = "# --8<-- [end:task]\n"


@dataclass(frozen=True)
class Task:
    name: str  # the program's file name, without .py
    title: str
    peers: tuple[str, ...]  # the peers' program names (pai_*, sdk_*)


TASKS = (
    Task("typed_tool", "Typed tool", ("pai_typed_tool",)),
    Task("typed_output", "Typed output", ("pai_typed_output",)),
    Task(
        "typed_output_two_levels",
        "A sub-agent's typed output reaching Python",
        ("pai_typed_output_two_levels",),
    ),
    Task("image_in", "Image in", ("pai_image_in",)),
    Task(
        "saved_conversation",
        "Saved and resumed conversation",
        ("sdk_saved_conversation", "pai_saved_conversation"),
    ),
    Task("deps_depth2", "Deps reaching a sub-agent's tool", ("sdk_deps_depth2", "pai_deps_depth2")),
    Task("stream_nested", "Streaming text of a sub-agent", ("pai_stream_nested",)),
    Task("guard", "A guard on a tool call", ("sdk_guard",)),
    Task("approval", "Approval of an own tool", ("pai_approval",)),
    Task("test_override", "A test with an override", ("pai_test_override",)),
)
PEER_NAMES = {"pai": "pydantic-ai 2.68", "sdk": "OpenAI Agents SDK 0.24"}


def program(name: str) -> Path:
    folder = "peers" if name.startswith(("pai_", "sdk_")) else "retinue"
    return SIDE / folder / f"{name}.py"


def task_lines(path: Path) -> list[str]:
    """The counted lines of one program: its task, without blanks and comments."""
    text = path.read_text(encoding="utf-8")
    start = text.index(START) + len(START)
    end = text.index(END, start)
    return [
        line
        for line in text[start:end].splitlines()
        if line.strip() and not line.lstrip().startswith("#") and "# (not counted" not in line
    ]


def run(name: str) -> bool:
    """Run one program once, in a folder of its own; whether it exited 0."""
    path = program(name)
    peer = path.parent.name == "peers"
    python = PEERS_PYTHON if peer else Path(sys.executable)
    if not python.exists():
        raise FileNotFoundError(f"{python}: make it from benchmarks/requirements-peers.txt")
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RETINUE_"))}
        env |= {"RETINUE_HOME": str(Path(tmp) / "home"), "RETINUE_BLOCK_REAL_MODELS": "1"}
        env |= {"PYTHONPATH": str(path.parent), "OPENAI_AGENTS_DISABLE_TRACING": "1"}
        done = subprocess.run(
            [str(python), str(path)], cwd=tmp, env=env, capture_output=True, text=True, timeout=120
        )
    if done.returncode != 0:
        print(f"{name}: FAILED\n{done.stderr[-2000:]}", file=sys.stderr)
    return done.returncode == 0


def table(counts: dict[str, int]) -> str:
    """The Markdown table of the counts (the page quotes it as it is)."""
    rows = [
        "| Task | Retinue | Best peer | Peer's lines | Other peer's lines |",
        "|---|---:|---|---:|---:|",
    ]
    for task in TASKS:
        best, *others = sorted(task.peers, key=lambda p: counts[p])
        other = ", ".join(f"{counts[p]} ({PEER_NAMES[p[:3]]})" for p in others) or "–"
        rows.append(
            f"| {task.title} | {counts[task.name]} | {PEER_NAMES[best[:3]]} | "
            f"{counts[best]} | {other} |"
        )
    return "\n".join(rows) + "\n"


def counts_of_all() -> dict[str, int]:
    names = [n for t in TASKS for n in (t.name, *t.peers)]
    return {name: len(task_lines(program(name))) for name in names}


def main(argv: list[str]) -> int:
    counts = counts_of_all()
    runs = {} if "--no-run" in argv else {name: run(name) for name in counts}
    result = {
        "counted": "non-blank, non-comment lines of the task (between its --8<-- markers)",
        "tasks": [
            {
                "task": t.name,
                "title": t.title,
                "retinue": counts[t.name],
                "peers": {p: counts[p] for p in t.peers},
                "best_peer": min(t.peers, key=lambda p: counts[p]),
                "retinue_not_longer": counts[t.name] <= min(counts[p] for p in t.peers),
            }
            for t in TASKS
        ],
        "passed": runs,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "library_lines.json").write_text(json.dumps(result, indent=2) + "\n")
    (RESULTS / "library_lines.md").write_text(table(counts))
    print(table(counts))
    failed = [name for name, ok in runs.items() if not ok]
    print(f"ran {len(runs)} programs, {len(failed)} failed {failed}" if runs else "not run")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
