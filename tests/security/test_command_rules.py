"""Issue 38, section 4: a Bash deny rule binds the sandboxed shell, whatever the spelling.

A black-box run: ``default`` mode, where ``Bash`` inside bubblewrap runs without asking,
nobody to approve, a ``Bash(rm:*)`` deny rule. A scripted model makes the attacker's exact
call through the real registry, gate and sandbox; afterwards the disk is examined, not what
the model was told. The same calls without the rule do delete the file (the control): the
rule, not a broken shell, is what keeps it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from retinue.engine import RunConfig, run
from retinue.messages import SystemMessage, ToolResultMessage, UserMessage
from retinue.policy.gate import Policy
from retinue.policy.rules import RuleSet
from retinue.testing import ScriptedModel, call_tool
from retinue.tools import ToolContext, ToolRegistry
from retinue.tools.builtin import builtin_tools
from retinue.tools.builtin.sandbox import bwrap_problem

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(bwrap_problem() is not None, reason=f"no sandbox: {bwrap_problem()}"),
]

SPELLINGS = [
    "bash -c 'rm f'",
    "X=rm; $X f",
    "echo $(rm f)",
    "r''m f",
    "$'\\x72m' f",
    "timeout 5 rm f",
    "env -i rm f",
    "echo f | xargs rm",
    "find . -name f -delete",
    "f() { rm f; }; f",
    "eval 'rm f'",
    "sh -c 'eval \"$0\"' 'rm f'",
]


async def bash(ws: Path, rules: RuleSet, command: str) -> ToolResultMessage:
    """One run whose model calls ``Bash(command)`` once; the result it read."""
    policy = Policy(modes=("default",), rules=rules, sandboxed=None)  # (bwrap, asked once)
    model = ScriptedModel([call_tool("Bash", {"command": command}), "done"])
    ctx = ToolContext("main", ws, ws.parent / "data", call_chain=("main",), gate=policy)
    registry = ToolRegistry(builtin_tools())
    out = await run(RunConfig(model, [SystemMessage("s"), UserMessage("go")], registry, ctx))
    assert out.stop_reason == "final"
    [result] = [m for m in model.calls[-1].messages if isinstance(m, ToolResultMessage)]
    return result


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "f").write_text("keep")
    return root


def deny_rm(ws: Path) -> RuleSet:
    rules = RuleSet()
    rules.add("deny", ["Bash(rm:*)"], ws)
    return rules


@pytest.mark.parametrize("command", SPELLINGS)
async def test_a_deny_rule_for_rm_leaves_the_file_on_disk(ws: Path, command: str) -> None:
    result = await bash(ws, deny_rm(ws), command)
    assert (ws / "f").read_text() == "keep"
    assert result.is_error and "permission denied" in result.content, result.content


async def test_the_same_run_without_the_rule_deletes_it_and_others_still_run(ws: Path) -> None:
    ran = await bash(ws, deny_rm(ws), "echo made > g && ls")
    assert not ran.is_error and (ws / "g").read_text() == "made\n"
    for command in ("bash -c 'rm f'", "X=rm; $X f"):
        (ws / "f").write_text("keep")
        result = await bash(ws, RuleSet(), command)
        assert not result.is_error, result.content
        assert not (ws / "f").exists(), command
