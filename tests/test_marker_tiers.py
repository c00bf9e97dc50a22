"""The unit / integration / external markers of tests/conftest.py: each test file lands in
the tier its needs say, and ``pytest -m unit`` leaves out whole files only when none of
their tests is a unit test."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest


def _root_conftest():  # (``import conftest`` finds whichever folder's conftest came first)
    spec = importlib.util.spec_from_file_location(
        "_retinue_root_conftest", Path(__file__).parent / "conftest.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


file_tier = _root_conftest().file_tier

TESTS = Path(__file__).parent


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("web/test_page.py", "external"),  # Chromium
        ("llm_local/test_gguf.py", "external"),  # the embedded model
        ("mcp_both/test_mcp_conformance.py", "external"),  # Node
        ("server/test_app.py", "integration"),  # a real server (its folder's conftest)
        ("cli/test_printers.py", "integration"),  # the CLI's folder
        ("subagents/test_lifecycle_fuzz.py", "integration"),  # a randomised run
        ("test_readme.py", "integration"),  # a second pytest in a subprocess
        ("test_messages.py", None),  # decided test by test: unit
        ("memory/test_blocks.py", None),  # unit on SQLite, external on PostgreSQL
    ],
)
def test_each_file_lands_in_the_tier_of_what_it_needs(path: str, expected: str | None) -> None:
    assert (TESTS / path).is_file()
    assert file_tier(TESTS / path) == expected


@pytest.mark.timeout(120)
def test_a_mixed_file_splits_by_backend_under_the_markers() -> None:
    def collected(marker: str) -> set[str]:
        args = ["--collect-only", "-q", "-o", "addopts=", "-p", "no:cacheprovider", "-m", marker]
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", *args, "tests/memory/test_blocks.py"],
            cwd=TESTS.parent,
            capture_output=True,
            text=True,
            timeout=100,
        )
        return {line for line in proc.stdout.splitlines() if "::" in line}

    unit, external = collected("unit"), collected("external")
    assert unit and external and not unit & external
    assert all("[sqlite]" in test for test in unit)
    assert all("[postgres]" in test for test in external)
