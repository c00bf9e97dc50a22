"""The refusal of a call nobody can approve names only what would let that call run (issue
41): with bubblewrap missing, ``acceptEdits`` does not allow a command, so it is not named."""

from __future__ import annotations

import json
from pathlib import Path

from retinue.messages import ToolCall
from retinue.policy.gate import Policy
from retinue.policy.rules import RuleSet
from retinue.tools import ToolContext, ToolRegistry, tool

RAN: list[str] = []


@tool("Bash")
def recording_bash(command: str) -> str:
    """Stands in for Bash (records the call; the gate must refuse it before it runs)."""
    RAN.append(command)
    return "ran"


@tool("Write")
def recording_write(file_path: str, content: str) -> str:
    """Stands in for Write (records the call)."""
    RAN.append(file_path)
    return "wrote"


async def refusal(policy: Policy, tmp_path: Path, name: str, args: dict[str, str]) -> str:
    registry = ToolRegistry([recording_bash, recording_write])
    ctx = ToolContext("main", tmp_path, tmp_path, gate=policy)
    result = await policy.execute(registry, ToolCall("c1", name, json.dumps(args)), ctx)
    assert result.is_error and "nobody is here to approve it" in result.content
    return result.content


async def test_an_unsandboxed_command_names_bypass_and_its_rule_not_accept_edits(
    tmp_path: Path,
) -> None:
    RAN.clear()
    policy = Policy(modes=("default",), sandboxed=False)  # bubblewrap missing
    said = await refusal(policy, tmp_path, "Bash", {"command": "ls -la"})
    assert "acceptEdits" not in said
    assert "--permission-mode bypassPermissions" in said
    assert 'add the rule "Bash(ls -la)" to permissions.allow' in said
    assert RAN == []


async def test_an_edit_names_both_modes_and_an_ask_rule_names_neither(tmp_path: Path) -> None:
    RAN.clear()
    policy = Policy(modes=("default",), sandboxed=False)
    said = await refusal(policy, tmp_path, "Write", {"file_path": "a.txt", "content": "x"})
    assert "--permission-mode acceptEdits or bypassPermissions" in said
    rules = RuleSet()
    rules.add("ask", ["Bash(git push:*)"], tmp_path)
    asking = Policy(modes=("default",), rules=rules, sandboxed=True)
    said = await refusal(asking, tmp_path, "Bash", {"command": "git push origin main"})
    assert "--permission-mode" not in said and "permissions.allow" not in said
    assert "no mode or allow rule lets it run" in said
    assert RAN == []
