"""``retinue run`` where nobody can answer (a pipe): a call that would ask is refused with how to
allow it, ``--permission-mode`` and rules allow it, a deny rule holds in every mode, and a
broken rule is reported by file and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_run import retinue

from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.testing import ScriptedModel, call_tool

pytestmark = pytest.mark.timeout(60)


def writes(path: str) -> ScriptedModel:
    return ScriptedModel([call_tool("Write", {"file_path": path, "content": "x"}), "done"])


def test_a_write_is_refused_with_nobody_to_ask_and_the_run_still_answers(tmp_path: Path) -> None:
    model = writes("out.txt")
    with LoopbackOpenAIServer(model) as server:
        proc = retinue(["run", "--model", "openai:test", "write out.txt"], server, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "done"
    assert not (tmp_path / "out.txt").exists()
    refusal = model.calls[-1].messages[-1].content
    assert "nobody is here to approve it" in refusal and "--permission-mode acceptEdits" in refusal


def test_accept_edits_lets_it_write(tmp_path: Path) -> None:
    with LoopbackOpenAIServer(writes("out.txt")) as server:
        args = ["run", "--model", "openai:test", "--permission-mode", "acceptEdits", "write"]
        proc = retinue(args, server, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out.txt").read_text() == "x"


def test_an_allow_rule_in_config_lets_it_and_a_deny_rule_holds_in_bypass_mode(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        '[permissions]\nallow = ["Edit(./out/**)"]\ndeny = ["Edit(./out/secret.txt)"]\n'
    )
    with LoopbackOpenAIServer(writes("out/ok.txt")) as server:
        proc = retinue(["run", "--model", "openai:test", "write"], server, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out" / "ok.txt").exists()
    model = writes("out/secret.txt")
    with LoopbackOpenAIServer(model) as server:
        args = ["run", "--model", "openai:test", "--permission-mode", "bypassPermissions", "w"]
        proc = retinue(args, server, tmp_path)
    assert not (tmp_path / "out" / "secret.txt").exists()
    assert "rule deny: Edit(./out/secret.txt)" in model.calls[-1].messages[-1].content


def test_a_broken_rule_is_reported_once_by_file_and_line(tmp_path: Path) -> None:
    (tmp_path / ".claude").mkdir()
    settings = {"permissions": {"deny": ["Read(./.env)", "WebFetch(nodomain)"]}}
    (tmp_path / ".claude" / "settings.json").write_text(json.dumps(settings, indent=2))
    with LoopbackOpenAIServer(ScriptedModel(["fine"])) as server:
        proc = retinue(["run", "--model", "openai:test", "hi"], server, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"{tmp_path / '.claude' / 'settings.json'}:5: permissions.deny" in proc.stderr
    assert "WebFetch takes domain:<host>" in proc.stderr


def test_an_unknown_mode_is_a_clear_line(tmp_path: Path) -> None:
    with LoopbackOpenAIServer(ScriptedModel(["fine"])) as server:
        args = ["run", "--model", "openai:test", "--permission-mode", "yolo", "hi"]
        proc = retinue(args, server, tmp_path)
    assert "unknown mode 'yolo'" in proc.stderr and "Traceback" not in proc.stderr


def test_a_run_ends_its_conversation_so_session_end_hooks_run(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    marker = tmp_path / "ended"
    (home / "config.toml").write_text(
        f'[[hooks.SessionEnd]]\nhooks = [{{ type = "command", command = "touch {marker}" }}]\n'
    )
    with LoopbackOpenAIServer(ScriptedModel(["fine"])) as server:
        proc = retinue(["run", "--model", "openai:test", "hi"], server, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert marker.exists()
