"""Path rules ignore case where the workspace's file system does (issue 41): there
``Secrets/key`` and ``secrets/KEY`` are one file, and a deny rule must hold for both."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from retinue.policy.fscase import ignores_case, probe
from retinue.policy.rules import parse_rule, rule_for


def reads(rule_text: str, path: str, workspace: Path, *, ignore_case: bool) -> bool:
    rule = parse_rule(rule_text, workspace, ignore_case=ignore_case)
    return rule.matches("Read", {"file_path": path}, workspace)


@pytest.mark.parametrize("path", ["secrets/key", "SECRETS/key", "Secrets/KEY.txt", "a/.ENV"])
def test_a_path_rule_ignores_case_on_a_case_insensitive_file_system(
    tmp_path: Path, path: str
) -> None:
    rules = ("Read(./secrets/**)", "Read(.env)")
    assert any(reads(r, path, tmp_path, ignore_case=True) for r in rules)


@pytest.mark.parametrize("path", ["SECRETS/key", "Secrets/KEY.txt", "a/.ENV"])
def test_a_path_rule_keeps_case_on_a_case_sensitive_file_system(tmp_path: Path, path: str) -> None:
    rules = ("Read(./secrets/**)", "Read(.env)")
    assert not any(reads(r, path, tmp_path, ignore_case=False) for r in rules)
    assert reads("Read(./secrets/**)", "secrets/key", tmp_path, ignore_case=False)


def test_the_probe_sees_two_spellings_of_one_folder(tmp_path: Path) -> None:
    """A case-insensitive file system, faked by a link from the other spelling."""
    (tmp_path / "Project").mkdir()
    (tmp_path / "other").mkdir()
    os.symlink(tmp_path / "Project", tmp_path / "pROJECT")
    assert probe(str(tmp_path / "Project"))
    (tmp_path / "OTHER").mkdir()  # another folder of the swapped name: case counts
    assert not probe(str(tmp_path / "other"))


@pytest.mark.skipif(sys.platform != "linux", reason="Linux's usual file systems keep case")
def test_a_linux_workspace_keeps_case_and_rules_follow_the_probe(tmp_path: Path) -> None:
    ws = tmp_path / "Work"
    ws.mkdir()
    assert not ignores_case(ws)
    rule = parse_rule("Read(./secrets/**)", ws)  # probed
    assert not rule.matches("Read", {"file_path": "SECRETS/key"}, ws)
    exact = rule_for("Read", {"file_path": "notes.txt"}, ws)
    assert exact is not None and not exact.matches("Read", {"file_path": "NOTES.txt"}, ws)


def test_rules_of_a_workspace_probed_as_case_insensitive_ignore_case(tmp_path: Path) -> None:
    ws = tmp_path / "Shop"
    ws.mkdir()
    os.symlink(ws, tmp_path / "sHOP")  # the probe finds the other spelling: one folder
    assert ignores_case(ws)
    rule = parse_rule("Read(./secrets/**)", ws)
    assert rule.matches("Read", {"file_path": "SECRETS/key"}, ws)
    exact = rule_for("Read", {"file_path": "notes.txt"}, ws)
    assert exact is not None and exact.matches("Read", {"file_path": "NOTES.txt"}, ws)
