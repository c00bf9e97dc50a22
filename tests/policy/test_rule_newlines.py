"""A newline in a path does not slip past a path rule: ``**`` and a folder rule's "and what
is inside" span it (file names may hold any byte but ``/`` and NUL)."""

from __future__ import annotations

from pathlib import Path

import pytest

from retinue.engine import RunConfig, run
from retinue.messages import SystemMessage, ToolResultMessage, UserMessage
from retinue.policy.gate import Policy
from retinue.policy.rules import RuleSet
from retinue.testing import ScriptedModel, call_tool
from retinue.tools import ToolContext, ToolRegistry
from retinue.tools.builtin import glob_tool, grep_tool, read_tool, write_tool


async def _one(ws: Path, policy: Policy, name: str, args: dict[str, str]) -> str:
    model = ScriptedModel([call_tool(name, args), "ok"])
    ctx = ToolContext("main", ws, ws, call_chain=("main",), gate=policy)
    tools = ToolRegistry([grep_tool, glob_tool, read_tool, write_tool])
    await run(RunConfig(model, [SystemMessage("s"), UserMessage("go")], tools, ctx))
    found = [m for m in model.calls[-1].messages if isinstance(m, ToolResultMessage)]
    return found[0].content


def _policy(ws: Path, mode: str, deny: list[str]) -> Policy:
    rules = RuleSet()
    rules.add("deny", deny, ws)
    assert not rules.problems
    return Policy(modes=(mode,), rules=rules)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["a\nb.txt", "x\n.txt"])
async def test_writes_with_a_newline_stay_out_of_a_denied_folder(tmp_path: Path, name: str) -> None:
    policy = _policy(tmp_path, "acceptEdits", ["Edit(./protected/**)", "Write(./ci)"])
    for path in (f"protected/{name}", f"ci/{name}"):
        said = await _one(tmp_path, policy, "Write", {"file_path": path, "content": "x"})
        assert "permission denied" in said
        assert not (tmp_path / path).exists()


async def test_a_denied_file_with_a_newline_is_neither_read_nor_listed(tmp_path: Path) -> None:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "nl\nname.txt").write_text("TOPSECRET\n")
    (tmp_path / "ok.txt").write_text("fine\n")
    policy = _policy(tmp_path, "default", ["Read(./secrets/**)"])
    read = await _one(tmp_path, policy, "Read", {"file_path": "secrets/nl\nname.txt"})
    assert "permission denied" in read and "TOPSECRET" not in read
    grep = await _one(tmp_path, policy, "Grep", {"pattern": "TOPSECRET", "output_mode": "content"})
    assert "TOPSECRET" not in grep
    listed = await _one(tmp_path, policy, "Glob", {"pattern": "**/*"})
    assert "nl" not in listed and "ok.txt" in listed
