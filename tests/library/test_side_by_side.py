"""The side-by-side programs of ``benchmarks/side_by_side/retinue/`` run, each in a process of
its own on its scripted model, and check what they did (a failed check exits non-zero); the
docs page's table is the one ``benchmarks/library_lines.py`` counts, and Retinue is never
longer than the best peer. The peers' programs need ``benchmarks/.venv-peers`` and are not
run here."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).parents[2]
PROGRAMS = ROOT / "benchmarks" / "side_by_side" / "retinue"
PAGE = ROOT / "docs" / "explanation" / "side-by-side.md"


def library_lines() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "library_lines", ROOT / "benchmarks" / "library_lines.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["library_lines"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


LINES = library_lines()

# What each program prints, on its scripted model.
PRINTS = {
    "typed_tool": "2 + 3 = 5",
    "typed_output": "needs work 2",
    "typed_output_two_levels": "one bug [Finding(file='src/app.py', bug='off by one')]",
    "image_in": "A login form.",
    "saved_conversation": "It ships today; here is a refund.",
    "deps_depth2": "The clerk says tea costs 1.5.",
    "stream_nested": "Here is the writer's haiku.",
    "guard": "I may not deploy to prod.",
    "approval": "Refunded.",
    "test_override": "passed",
}


def test_every_task_has_its_program_and_its_expected_output() -> None:
    assert {t.name for t in LINES.TASKS} == set(PRINTS)
    assert {p.stem for p in PROGRAMS.glob("[!_]*.py")} == set(PRINTS)


@pytest.mark.parametrize("name", sorted(PRINTS))
def test_the_retinue_program_runs_and_checks_itself(name: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RETINUE_"))}
    env |= {"RETINUE_HOME": str(tmp_path / "home"), "RETINUE_BLOCK_REAL_MODELS": "1"}
    done = subprocess.run(
        [sys.executable, str(PROGRAMS / f"{name}.py")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1].endswith(PRINTS[name]), done.stdout


def test_the_page_quotes_the_measured_table_and_retinue_is_never_longer() -> None:
    counts = LINES.counts_of_all()
    assert LINES.table(counts) in PAGE.read_text(encoding="utf-8")
    for task in LINES.TASKS:
        assert counts[task.name] <= min(counts[p] for p in task.peers), task.name


def test_only_the_task_is_counted(tmp_path: Path) -> None:
    program = tmp_path / "p.py"
    program.write_text(
        "setup = 1\n# --8<-- [start:task]\nimport x\n\n# a comment\n"
        "y = 2  # (not counted: for the check)\nz = 3  # a note\n# --8<-- [end:task]\nassert z\n"
    )
    assert LINES.task_lines(program) == ["import x", "z = 3  # a note"]
