"""What a user sees at the command line's edges (issue 25, items 13 and 16): a port out of
range is one usage error, not a traceback; ``memory search`` for a role that does not exist
exits 1 as ``memory show`` does; usage lines name arguments plainly; ``--version``."""

from __future__ import annotations

import asyncio
import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from retinue.cli.app import app
from retinue.memory import open_memory

pytestmark = pytest.mark.timeout(60)

runner = CliRunner()


def retinue(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RETINUE_"))}
    env |= {"RETINUE_HOME": str(tmp_path / "home"), "RETINUE_BLOCK_REAL_MODELS": "1"}
    env["RETINUE_MODEL"] = "openai:test"  # never the embedded model: nothing may start
    return subprocess.run(
        [sys.executable, "-m", "retinue", *args],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=50,
    )


@pytest.mark.parametrize(
    "args",
    [
        ["serve", "--port", "70000"],
        ["serve", "--port", "-5"],
        ["mcp", "serve", "--http", "--port", "70000"],
        ["mcp", "serve", "--http", "--port", "-5"],
    ],
)
def test_a_port_out_of_range_is_one_usage_error(args: list[str], tmp_path: Path) -> None:
    proc = retinue(args, tmp_path)
    assert proc.returncode == 2, proc.stderr  # a usage error, before anything starts
    assert "Traceback" not in proc.stderr and "OverflowError" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "--port" in errors[0], proc.stderr
    assert not (tmp_path / "home").exists()  # nothing was created


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("RETINUE_HOME", str(home))
    monkeypatch.delenv("RETINUE_MODEL", raising=False)
    monkeypatch.chdir(tmp_path)
    store = open_memory(home)
    asyncio.run(store.insert_passage("default", "researcher", "The CI runs on Debian"))
    store.close()
    return home


def test_memory_search_for_a_role_that_does_not_exist_exits_1_like_show(home: Path) -> None:
    for command in ("show", "search"):
        args = ["memory", command, "nosuchrole", *(["foo"] if command == "search" else [])]
        result = runner.invoke(app, args)
        assert result.exit_code == 1, (command, result.output)
        assert "no role named 'nosuchrole'" in result.output and "researcher" in result.output
    found = runner.invoke(app, ["memory", "search", "researcher", "Debian"])
    assert found.exit_code == 0 and "The CI runs on Debian" in found.output
    missed = runner.invoke(app, ["memory", "search", "researcher", "zebra"])
    assert missed.exit_code == 0 and "no passages match 'zebra'" in missed.output
    unknown_query = runner.invoke(app, ["memory", "search", "tester", "zebra"])  # a role, empty
    assert unknown_query.exit_code == 0, unknown_query.output


@pytest.mark.parametrize(
    ("args", "usage"),
    [
        (["run"], " run [OPTIONS] TASK"),
        (["interrupt"], " interrupt [OPTIONS] SESSION_ID"),
        (["memory", "search"], " memory search [OPTIONS] ROLE QUERY"),
    ],
)
def test_usage_lines_name_required_arguments_plainly(
    args: list[str], usage: str, tmp_path: Path
) -> None:
    proc = retinue(args, tmp_path)
    assert proc.returncode == 2
    first = proc.stderr.splitlines()[0]
    assert first.startswith("Usage: ") and first.endswith(usage), first
    assert "{" not in proc.stderr


def test_version(tmp_path: Path) -> None:
    proc = retinue(["--version"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"retinue {importlib.metadata.version('retinue')}\n"
