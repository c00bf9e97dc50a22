"""Issue 38, section 6: a home folder (or the data directory) inside the workspace.

``retinue chat`` started in ``~`` makes the workspace the home folder: ``~/.claude`` is then
the user's own settings (what runs at every start), and ``~/.ssh``, ``~/.aws`` and the data
directory (server tokens, approvals) lie inside the workspace. The Bash sandbox hides those;
the file tools must hide them too, and an edit of ``~/.claude`` must ask a person in every
mode. Black-box runs: a scripted model makes the attacker's exact calls through the real
registry and the real gate (nobody to approve: an ask is a refusal), canary files on disk.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from retinue.engine import RunConfig, run
from retinue.messages import SystemMessage, ToolResultMessage, UserMessage
from retinue.policy.gate import Policy
from retinue.testing import ScriptedModel, call_tool
from retinue.tools import ToolContext, ToolRegistry
from retinue.tools.builtin import builtin_tools

CANARY = "CANARY-8c2d41"
SECRETS = {
    ".ssh/id_ed25519": f"-----BEGIN OPENSSH PRIVATE KEY----- {CANARY}-ssh\n",
    ".aws/credentials": f"[default]\naws_secret_access_key = {CANARY}-aws\n",
    ".netrc": f"machine example.com password {CANARY}-netrc\n",
    ".retinue/server-tokens.json": f'{{"ci": "{CANARY}-token"}}\n',
}


async def attack(
    ws: Path, data_dir: Path, mode: str, *calls: tuple[str, dict]
) -> list[ToolResultMessage]:
    """Run the scripted attacker's ``calls`` (one a turn) under ``mode``; the results."""
    model = ScriptedModel([*(call_tool(name, args) for name, args in calls), "done"])
    policy = Policy(modes=(mode,))  # type: ignore[arg-type]
    ctx = ToolContext("main", ws, data_dir, call_chain=("main",), gate=policy)
    registry = ToolRegistry(builtin_tools())
    out = await run(RunConfig(model, [SystemMessage("s"), UserMessage("go")], registry, ctx))
    assert out.stop_reason == "final"
    return [m for m in model.calls[-1].messages if isinstance(m, ToolResultMessage)]


def snapshot(root: Path) -> dict[Path, bytes]:
    """Every file below ``root`` and what it holds."""
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The workspace is the home folder, with secrets and the data directory in it."""
    root = tmp_path / "home"
    for rel, text in SECRETS.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    (root / "notes.txt").write_text("ordinary\n")
    monkeypatch.setenv("HOME", str(root))
    return root


@pytest.mark.parametrize("mode", ["acceptEdits", "bypassPermissions"])
@pytest.mark.parametrize(
    "file_path", ["~/.claude/settings.local.json", ".claude/settings.local.json"]
)
async def test_an_edit_of_the_users_claude_settings_asks_in_every_mode(
    home: Path, mode: str, file_path: str
) -> None:
    hook = '{"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "env"}]}]}}'
    [result] = await attack(
        home, home / ".retinue", mode, ("Write", {"file_path": file_path, "content": hook})
    )
    assert result.is_error and "permission denied" in result.content
    assert not (home / ".claude" / "settings.local.json").exists()


@pytest.mark.parametrize("mode", ["acceptEdits", "bypassPermissions"])
async def test_an_edit_of_claude_settings_in_a_home_below_the_workspace_asks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    ws = tmp_path / "ws"
    user = ws / "users" / "ann"
    user.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(user))
    results = await attack(
        ws,
        user / ".retinue",
        mode,
        ("Write", {"file_path": "~/.claude/settings.json", "content": "{}"}),
        ("Write", {"file_path": "users/ann/.claude/settings.json", "content": "{}"}),
    )
    assert all(r.is_error and "permission denied" in r.content for r in results)
    assert not (user / ".claude").exists()


@pytest.mark.parametrize("rel", list(SECRETS))
@pytest.mark.parametrize("spelt", ["{rel}", "~/{rel}", "./x/../{rel}"])
async def test_read_does_not_return_what_the_sandbox_hides(
    home: Path, rel: str, spelt: str
) -> None:
    [result] = await attack(
        home, home / ".retinue", "bypassPermissions", ("Read", {"file_path": spelt.format(rel=rel)})
    )
    assert CANARY not in result.content
    assert result.is_error and "hidden" in result.content


async def test_searches_and_listings_neither_show_nor_read_what_the_sandbox_hides(
    home: Path,
) -> None:
    results = await attack(
        home,
        home / ".retinue",
        "bypassPermissions",
        ("Grep", {"pattern": CANARY, "output_mode": "content"}),
        ("Grep", {"pattern": "BEGIN", "path": ".ssh", "output_mode": "content"}),
        ("Glob", {"pattern": "**/*"}),
        ("Glob", {"pattern": "*", "path": "~/.aws"}),
        ("LS", {"path": "."}),
        ("LS", {"path": ".ssh"}),
    )
    every = "\n".join(r.content for r in results)
    assert CANARY not in every
    for name in ("id_ed25519", "credentials", ".netrc", "server-tokens.json"):
        assert name not in every
    ls_root = results[4].content
    assert "notes.txt" in ls_root
    assert ".ssh" not in ls_root and ".aws" not in ls_root and ".retinue" not in ls_root


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("Write", {"file_path": ".ssh/authorized_keys", "content": "ssh-ed25519 AAAA attacker"}),
        ("Write", {"file_path": "~/.aws/config", "content": "[default]\n"}),
        ("Write", {"file_path": ".retinue/config.toml", "content": "[hooks]\n"}),
        ("Edit", {"file_path": ".netrc", "old_string": "password", "new_string": "login"}),
        ("Edit", {"file_path": ".ssh/config", "old_string": "", "new_string": "Host *\n"}),
    ],
)
async def test_write_and_edit_cannot_create_or_change_what_the_sandbox_hides(
    home: Path, tool: str, args: dict
) -> None:
    before = snapshot(home)
    [result] = await attack(home, home / ".retinue", "bypassPermissions", (tool, args))
    after = snapshot(home)
    assert after == before
    assert result.is_error


async def test_a_data_directory_inside_the_workspace_is_hidden_from_file_tools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = tmp_path / "ws"
    data = ws / "var" / "retinue"
    data.mkdir(parents=True)
    (data / "server-tokens.json").write_text(f'{{"ci": "{CANARY}"}}\n')
    monkeypatch.setenv("HOME", str(tmp_path / "elsewhere"))
    results = await attack(
        ws,
        data,
        "bypassPermissions",
        ("Read", {"file_path": "var/retinue/server-tokens.json"}),
        ("Grep", {"pattern": "ci", "output_mode": "content"}),
        ("Write", {"file_path": "var/retinue/config.toml", "content": "[hooks]\n"}),
    )
    assert CANARY not in "\n".join(r.content for r in results)
    assert results[0].is_error and results[2].is_error
    assert not (data / "config.toml").exists()
