"""``Agent(setting_sources=...)`` chooses which settings files apply to a library agent, as the
Claude Agent SDK's option does: ``"user"`` (``~/.claude/settings.json`` and Retinue's
``config.toml``), ``"project"`` (``.claude/settings.json``), ``"local"``
(``.claude/settings.local.json``); their rules and their hooks alike. The default is all."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from retinue import Agent, ConfigError, SettingSource, ToolResultMessage, tool
from retinue.testing import ScriptedModel, call_tool


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"{key}=42"


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    """(workspace, the user's home, Retinue's data directory), each empty."""
    ws, user, data = tmp_path / "ws", tmp_path / "user", tmp_path / "data"
    for folder in (ws / ".claude", user / ".claude", data):
        folder.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(user))
    return ws, user, data


def settings_file(source: SettingSource, ws: Path, user: Path) -> Path:
    return {
        "user": user / ".claude" / "settings.json",
        "project": ws / ".claude" / "settings.json",
        "local": ws / ".claude" / "settings.local.json",
    }[source]


def refused(ws: Path, data: Path, sources: list[SettingSource] | None) -> bool:
    """Whether a ``lookup`` call is refused under ``sources``."""
    model = ScriptedModel([call_tool("lookup", {"key": "a"}), "done"])
    agent = Agent(model, workspace=ws, home=data, tools=[lookup], builtin_tools=False,
                  memory=False, setting_sources=sources)  # fmt: skip
    agent.run_sync("look a up")
    [result] = [m for m in model.calls[-1].messages if isinstance(m, ToolResultMessage)]
    return result.is_error and "permission denied" in result.content


@pytest.mark.parametrize("source", ["user", "project", "local"])
def test_each_file_applies_only_when_its_source_is_chosen(
    places: tuple[Path, Path, Path], source: SettingSource
) -> None:
    ws, user, data = places
    settings_file(source, ws, user).write_text(json.dumps({"permissions": {"deny": ["lookup"]}}))
    assert refused(ws, data, None)  # the default: every source
    assert refused(ws, data, [source])
    others: list[SettingSource] = [s for s in ("user", "project", "local") if s != source]
    assert not refused(ws, data, others)
    assert not refused(ws, data, [])


def test_retinue_config_is_the_users_own(places: tuple[Path, Path, Path]) -> None:
    ws, _, data = places
    (data / "config.toml").write_text('[permissions]\ndeny = ["lookup"]\n')
    assert refused(ws, data, ["user"])
    assert not refused(ws, data, ["project", "local"])


def test_hooks_of_a_source_left_out_do_not_run(places: tuple[Path, Path, Path]) -> None:
    ws, user, data = places
    log = ws / "hook.log"
    hook = {"type": "command", "command": f"cat >> {log}"}
    settings = {"hooks": {"PreToolUse": [{"matcher": "lookup", "hooks": [hook]}]}}
    settings_file("user", ws, user).write_text(json.dumps(settings))
    assert not refused(ws, data, ["project", "local"])
    assert not log.exists()
    assert not refused(ws, data, ["user"])
    assert '"tool_name": "lookup"' in log.read_text()


def test_an_unknown_source_is_a_config_error_at_once(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown"):
        Agent(ScriptedModel([]), workspace=tmp_path, setting_sources=["team"])  # type: ignore[list-item]
    with pytest.raises(ConfigError, match="a list"):
        Agent(ScriptedModel([]), workspace=tmp_path, setting_sources="user")  # type: ignore[arg-type]
