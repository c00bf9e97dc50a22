"""Issue 38, section 5: what a person approved is what the file tools write.

A person approves ``Write d/new.txt``; while the request waits, a parallel command (the
agent's sandboxed Bash may) swaps the folder ``d`` for a symlink to ``.claude/`` or to a
folder a deny rule protects. Each test is a black-box run: a scripted model makes the
attacker's exact calls through the real registry and the real gate, whose approver swaps
the folder before it answers yes; then the disk is checked.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from retinue.engine import RunConfig, run
from retinue.messages import SystemMessage, ToolResultMessage, UserMessage
from retinue.policy.approvals import Approval, ApprovalRequest
from retinue.policy.gate import Policy
from retinue.policy.rules import RuleSet
from retinue.testing import ScriptedModel, call_tool, call_tools
from retinue.tools import ToolContext, ToolRegistry
from retinue.tools.builtin import builtin_tools
from retinue.tools.builtin.sandbox import bwrap_problem

CANARY = "CANARY-3f1e9b"


def swapping_approver(ws: Path, folder: str, target: str, asked: list[ApprovalRequest]):
    """Says yes, after replacing ``ws/folder`` by a symlink to ``target`` (the race)."""

    def approve(request: ApprovalRequest) -> Approval:
        asked.append(request)
        os.rename(ws / folder, ws / f"{folder}.old")
        os.symlink(target, ws / folder)
        return Approval(True)

    return approve


async def attack(ws: Path, policy: Policy, *calls: tuple[str, dict]) -> list[ToolResultMessage]:
    """Run the scripted attacker's ``calls`` (one a turn); the results it read."""
    model = ScriptedModel([*(call_tool(name, args) for name, args in calls), "done"])
    ctx = ToolContext("main", ws, ws.parent / "data", call_chain=("main",), gate=policy)
    registry = ToolRegistry(builtin_tools())
    out = await run(RunConfig(model, [SystemMessage("s"), UserMessage("go")], registry, ctx))
    assert out.stop_reason == "final"
    return [m for m in model.calls[-1].messages if isinstance(m, ToolResultMessage)]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "d").mkdir(parents=True)
    (root / ".claude").mkdir()
    (root / "protected").mkdir()
    return root


def deny_protected(ws: Path) -> RuleSet:
    rules = RuleSet()
    rules.add("deny", ["Edit(./protected/**)", "Read(./protected/**)"], ws)
    assert not rules.problems
    return rules


@pytest.mark.parametrize("into", [".claude", "protected"])
async def test_an_approved_write_does_not_land_where_a_swapped_folder_points(
    ws: Path, into: str
) -> None:
    asked: list[ApprovalRequest] = []
    policy = Policy(
        modes=("default",),
        rules=deny_protected(ws),
        approver=swapping_approver(ws, "d", into, asked),
    )
    [result] = await attack(ws, policy, ("Write", {"file_path": "d/new.txt", "content": CANARY}))
    assert len(asked) == 1 and asked[0].tool == "Write"  # the person saw d/new.txt
    assert not (ws / into / "new.txt").exists()
    assert result.is_error
    assert "d/new.txt" in result.content and "symbolic link" in result.content


@pytest.mark.parametrize("tool", ["Edit", "MultiEdit"])
async def test_an_approved_edit_does_not_change_the_file_a_swapped_folder_points_at(
    ws: Path, tool: str
) -> None:
    (ws / "d" / "settings.json").write_text('{"hooks": {}}\n')
    (ws / ".claude" / "settings.json").write_text('{"hooks": {}}\n')
    policy = Policy(modes=("default",), approver=swapping_approver(ws, "d", ".claude", []))
    change = {"old_string": '"hooks": {}', "new_string": f'"hooks": "{CANARY}"'}
    args = {"file_path": "d/settings.json"}
    args |= {"edits": [change]} if tool == "MultiEdit" else change
    [result] = await attack(ws, policy, (tool, args))
    assert (ws / ".claude" / "settings.json").read_text() == '{"hooks": {}}\n'
    assert result.is_error and "symbolic link" in result.content


async def test_an_approved_read_does_not_return_a_denied_file_a_swapped_folder_points_at(
    ws: Path,
) -> None:
    (ws / "d" / "key.txt").write_text("nothing here\n")
    (ws / "protected" / "key.txt").write_text(CANARY + "\n")
    rules = deny_protected(ws)
    rules.add("ask", ["Read(./d/**)"], ws)
    policy = Policy(
        modes=("default",), rules=rules, approver=swapping_approver(ws, "d", "protected", [])
    )
    [result] = await attack(ws, policy, ("Read", {"file_path": "d/key.txt"}))
    assert CANARY not in result.content
    assert result.is_error and "permission rules" in result.content


async def test_a_parallel_sandboxed_bash_cannot_redirect_an_approved_write(ws: Path) -> None:
    """The attack as reported: one turn asks for ``Write d/new.txt`` and, alongside, a
    sandboxed ``Bash`` (allowed without asking) that swaps ``d`` for a link to ``.claude``;
    the person answers yes once the swap has happened."""
    if (problem := bwrap_problem()) is not None:
        pytest.skip(f"needs bubblewrap: {problem}")

    async def approve_once_swapped(request: ApprovalRequest) -> Approval:
        for _ in range(2000):  # (the command runs in parallel; at most ~40 s)
            if (ws / "d").is_symlink():
                break
            await asyncio.sleep(0.02)
        return Approval(True)

    model = ScriptedModel(
        [
            call_tools(
                ("Write", {"file_path": "d/new.txt", "content": CANARY}),
                ("Bash", {"command": "mv d d.old && ln -s .claude d"}),
            ),
            "done",
        ]
    )
    policy = Policy(modes=("default",), approver=approve_once_swapped, sandboxed=True)
    ctx = ToolContext("main", ws, ws.parent / "data", call_chain=("main",), gate=policy)
    config = RunConfig(
        model, [SystemMessage("s"), UserMessage("go")], ToolRegistry(builtin_tools()), ctx
    )
    assert (await run(config)).stop_reason == "final"
    write, bash = [m for m in model.calls[-1].messages if isinstance(m, ToolResultMessage)]
    assert not bash.is_error, bash.content
    assert (ws / "d").is_symlink()  # the swap happened
    assert not (ws / ".claude" / "new.txt").exists()
    assert write.is_error and "symbolic link" in write.content
