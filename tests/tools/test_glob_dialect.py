"""One glob dialect: a permission rule hides exactly what ``Glob`` lists for its pattern.

Before, a rule read ``[ab]`` as the three characters and ``Glob`` as a character class, so
``Read(./[ab]*.txt)`` hid nothing while ``Glob("[ab]*.txt")`` listed ``a.txt``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from retinue.messages import ToolCall
from retinue.policy.gate import Policy
from retinue.policy.rules import RuleSet, parse_rule
from retinue.tools import ToolContext, ToolRegistry
from retinue.tools.builtin import glob_tool, grep_tool, ls_tool
from retinue.tools.builtin.globs import escape, glob_regex

FILES = ["a.txt", "b.txt", "c.txt", "ab.txt", "[a].txt", "x.py", "d/a.txt", "d/e/b1.txt",
         "d/e/c1.md", "f/g.ts", "f/g.tsx"]  # fmt: skip
PATTERNS = ["[ab].txt", "[!ab].txt", "[^a]*.txt", "?.txt", "\\[a].txt", "*.{py,md}",
            "d/**/[bc]1.*", "**/[a-b]*.txt", "f/*.ts{,x}", "d/*/*"]  # fmt: skip


def _tree(ws: Path) -> None:
    for rel in FILES:
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text("needle\n")


async def _call(ws: Path, policy: Policy | None, name: str, **args: object) -> list[str]:
    ctx = ToolContext("main", ws, ws, call_chain=("main",), gate=policy)
    registry = ToolRegistry([glob_tool, grep_tool, ls_tool])
    result = await registry.execute(ToolCall("c", name, json.dumps(args)), ctx)
    assert not result.is_error, result.content
    return [line for line in result.content.splitlines() if not line.startswith(("(", "Found"))]


@pytest.mark.parametrize("pattern", PATTERNS)
async def test_a_deny_rule_hides_what_glob_lists_for_its_pattern(
    tmp_path: Path, pattern: str
) -> None:
    _tree(tmp_path)
    listed = set(await _call(tmp_path, None, "Glob", pattern=pattern))
    assert listed and listed != set(FILES), pattern  # (a pattern that tells files apart)
    rules = RuleSet()
    rules.add("deny", [f"Read(./{pattern})"], tmp_path)
    assert not rules.problems
    policy = Policy(modes=("default",), rules=rules)
    seen = set(await _call(tmp_path, policy, "Glob", pattern="**/*"))
    assert set(FILES) - seen == listed, pattern
    grepped = set(await _call(tmp_path, policy, "Grep", pattern="needle"))
    assert set(FILES) - grepped == listed, pattern


async def test_grep_glob_and_ls_ignore_read_brackets_as_glob_does(tmp_path: Path) -> None:
    _tree(tmp_path)
    grepped = await _call(tmp_path, None, "Grep", pattern="needle", glob="[ab].txt")
    assert set(grepped) == {"a.txt", "b.txt", "d/a.txt"}  # (rg: a name at any depth)
    listing = await _call(tmp_path, None, "LS", ignore=["[ab].txt", "[!a-z]*", "*.{py,md}"])
    names = {line.strip().split()[0] for line in listing[1:]}
    assert names == {"ab.txt", "c.txt", "d/", "f/"}


def test_a_workspace_path_with_pattern_characters_is_plain_text(tmp_path: Path) -> None:
    ws = tmp_path / "w[1]*"
    ws.mkdir()
    rule = parse_rule("Read(./secret.txt)", ws, ignore_case=False)
    assert rule.matches("Read", {"file_path": "secret.txt"}, ws)
    other = tmp_path / "w1x"
    other.mkdir()
    assert not rule.matches("Read", {"file_path": str(other / "secret.txt")}, ws)
    assert re.fullmatch(glob_regex(escape(str(ws))), str(ws))


@pytest.mark.parametrize(
    ("pattern", "path", "hit"),
    [
        ("[ab]1", "a1", True),
        ("[!ab]1", "c1", True),
        ("[!ab]1", "/1", False),
        ("[]x]", "]", True),
        ("a[b", "a[b", True),
        ("*", "a/b", False),
        ("**/x", "x", True),
        ("**/x", "a/b/x", True),
        ("a/**", "a/b/c", True),
        ("a**b", "a/b", False),
        ("{a,b{c,d}}", "bd", True),
        ("{a", "{a", True),
        ("\\*", "*", True),
        ("\\*", "x", False),
        ("*.env", ".env", True),
    ],
)
def test_the_dialect(pattern: str, path: str, hit: bool) -> None:
    assert (re.fullmatch(glob_regex(pattern), path) is not None) is hit
