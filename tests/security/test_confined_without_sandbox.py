"""Issue 38, section 2, where bubblewrap cannot run (``RETINUE_BWRAP`` names a program that
does not exist): a hook or MCP server that a workspace file defines is approved, yet it does
not start unconfined; it is refused with one line naming ``retinue doctor``, even when the
user's ``[sandbox] trusted_outside`` names it (that list is for the user's own). The user's
own hooks and servers still run (on the host, as the ``Bash`` tool then does), with a warning.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest

from retinue.config import Settings
from retinue.errors import ConfigError
from retinue.mcp.client import McpError
from retinue.mcp.config import build_hub, startable
from retinue.policy.hooks import definition, load_hooks
from retinue.policy.trust import TrustStore

pytestmark = pytest.mark.timeout(60)

MARK = "import pathlib, sys; pathlib.Path(sys.argv[1]).write_text('ran')"


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RETINUE_BWRAP", str(tmp_path / "no-such-bwrap"))
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    (tmp_path / "user").mkdir()
    path = tmp_path / "ws"
    (path / ".claude").mkdir(parents=True)
    return path


@pytest.mark.parametrize("outside", [[], ["hooks"]])
async def test_an_approved_project_hook_is_refused_and_the_users_own_runs(
    tmp_path: Path, ws: Path, caplog: pytest.LogCaptureFixture, outside: list[str]
) -> None:
    data = tmp_path / "data"
    project = {"hooks": {"Stop": [{"hooks": [{"command": f"touch {ws / 'project-ran'}"}]}]}}
    (ws / ".claude" / "settings.json").write_text(json.dumps(project))
    own = {"Stop": [{"hooks": [{"command": f"touch {ws / 'own-ran'}"}]}]}
    waiting = load_hooks(ws, data, config=own, user_home=tmp_path / "user")
    TrustStore(data).approve([definition(c) for c in waiting.untrusted])
    hooks = load_hooks(ws, data, config=own, user_home=tmp_path / "user",
                       trusted_outside=outside)  # fmt: skip
    assert len(hooks.commands) == 2 and not hooks.untrusted  # approved: the test is honest
    with caplog.at_level(logging.WARNING):
        said = await hooks.run("Stop", {"cwd": str(ws)})
    assert not (ws / "project-ran").exists()
    (line,) = said.problems
    assert "settings.json" in line and "was not started" in line and "retinue doctor" in line
    assert "\n" not in line
    assert (ws / "own-ran").exists()
    warned = "your own hooks and MCP servers run unconfined" in caplog.text
    assert warned == (not outside)  # trusted outside: no news that it runs outside


async def test_an_approved_workspace_server_is_refused_and_the_users_own_starts(
    tmp_path: Path, ws: Path
) -> None:
    spy = {"command": sys.executable, "args": ["-c", MARK, str(ws / "server-ran")]}
    (ws / ".mcp.json").write_text(json.dumps({"mcpServers": {"spy": spy}}))
    home = tmp_path / "data"
    home.mkdir()
    mine = {"command": sys.executable, "args": ["-c", MARK, str(ws / "own-ran")]}
    (home / "config.toml").write_text(
        '[sandbox]\ntrusted_outside = ["mcp", "mcp:spy"]\n\n'
        f"[mcp_servers.mine]\ncommand = {json.dumps(mine['command'])}\n"
        f"args = {json.dumps(mine['args'])}\n"
    )
    settings = Settings.load(home=home, workspace=ws, model="scripted:model")
    ok, refused = startable(settings, [], ask=lambda d: True)  # approved, as a person would
    assert {c.name for c in ok} == {"spy", "mine"} and not refused
    hub = build_hub(settings, ok)
    assert hub is not None
    try:
        with pytest.raises(McpError) as caught:
            await hub.servers["spy"].list_tools()
        assert "retinue doctor" in str(caught.value) and "sandbox" in str(caught.value)
        assert not (ws / "server-ran").exists()
        with pytest.raises(McpError):  # it marks its start and exits: no MCP server
            await hub.servers["mine"].list_tools()
        assert (ws / "own-ran").read_text() == "ran"  # but it was started
    finally:
        await hub.close()


def test_trusted_outside_takes_only_what_it_knows(tmp_path: Path, ws: Path) -> None:
    home = tmp_path / "data"
    home.mkdir()
    (home / "config.toml").write_text('[sandbox]\ntrusted_outside = ["everything"]\n')
    with pytest.raises(ConfigError, match=r"sandbox\.trusted_outside"):
        Settings.load(home=home, workspace=ws, model="scripted:model")
