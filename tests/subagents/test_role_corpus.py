"""The real-world corpus (``../shared/claude-agents-corpus``: 640 Claude Code sub-agent files
from 9 public repositories and xbot's 5 role files) loads as those tools load it.

Claude Code skips a file without front matter and loads every other one that has a name and
a description; so does Retinue, which refuses on top only a role whose tools are all
unavailable here (two roles that list nothing but MCP tools), instead of running it bare.
"""

from __future__ import annotations

import re
import shutil
from collections import Counter
from pathlib import Path

import pytest

from retinue.errors import RoleError
from retinue.llm.tokens import estimate_text_tokens
from retinue.subagents import Role, RoleCatalog, parse_role, role_dirs
from retinue.subagents.role_files import read_role_file
from retinue.subagents.tools import roles_section
from retinue.tools.builtin import builtin_tools

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "claude-agents-corpus"
KNOWN_TOOLS = [*(t.name for t in builtin_tools()), "SubAgent", "FindRole"]

pytestmark = pytest.mark.skipif(not CORPUS.is_dir(), reason=f"corpus not found at {CORPUS}")


def corpus_files() -> list[Path]:
    return sorted(p for p in CORPUS.rglob("*.md") if p.name != "SOURCES.md")


def load_each() -> tuple[dict[Path, Role], dict[Path, str]]:
    loaded, refused = {}, {}
    for path in corpus_files():
        try:
            loaded[path] = parse_role(path, read_role_file(path))
        except RoleError as exc:
            refused[path] = str(exc)
    return loaded, refused


def test_every_corpus_file_loads_exactly_when_claude_code_would() -> None:
    loaded, refused = load_each()
    assert len(loaded) + len(refused) == 645
    assert {f"{p.parent.name}/{p.name}": r.split(" (")[0] for p, r in refused.items()} == {
        "0xfurai__claude-code-subagents/sqs-expert.md": "no front matter",  # indented block
        "AgentWorkforce__relay/planner-strategy.md": "no front matter",  # prompt fragments
        "AgentWorkforce__relay/reviewer-criteria.md": "no front matter",
        "AgentWorkforce__relay/worker-focus.md": "no front matter",
    }
    notes = Counter(n.split(" ")[0] for r in loaded.values() for n in r.notes)
    assert notes == {"front": 18, "name": 5}  # unquoted ': ' read as text; names normalised
    # models: full ids, aliases (fable and xbot's swift included) resolve; none is refused
    assert Counter(r.model for r in loaded.values()) == {
        "anthropic:claude-sonnet-4-5": 224,
        None: 162,  # inherit or absent
        "anthropic:claude-sonnet-4-20250514": 136,
        "anthropic:claude-opus-4-1": 63,
        "anthropic:claude-haiku-4-5": 56,
    }
    assert sum(r.tools is None for r in loaded.values()) == 360  # no allow-list: every tool
    delegating = [p for p, r in loaded.items() if r.can("spawn_agent")]
    assert len(delegating) == 42  # Task/Agent in tools (37 + Agent 1), xbot's default (4)
    disallowing = {p.stem: r for p, r in loaded.items() if r.disallowed}
    assert sorted(disallowing) == [
        "arena--expert", "evidence-gatherer", "hypothesizer", "researcher", "think--expert",
        "verifier",
    ]  # fmt: skip
    assert all({"Write", "Edit", "Bash"} <= set(r.disallowed) for r in disallowing.values())


def test_the_whole_corpus_as_one_catalog() -> None:
    catalog = RoleCatalog.load(sorted(p for p in CORPUS.iterdir() if p.is_dir()))
    catalog.check_tools(KNOWN_TOOLS)
    assert sum(n for _, n in catalog.searched) == 645
    errors = Counter(re.sub(r" \(.*|,.*", "", p.reason) for p in catalog.errors())
    assert errors == {"no front matter": 4, "no usable tool": 2}  # the 2 list only MCP tools
    assert {p.path.name for p in catalog.errors() if "usable" in p.reason} == {
        "gallery-researcher.md", "image-generator.md"
    }  # fmt: skip
    left_out = [p.reason for p in catalog.problems if "not available here" in p.reason]
    assert len(left_out) == 31  # LSP, SendMessage, Task* and unconfigured MCP tools
    assert not any(
        re.search(r"\b(WebFetch|WebSearch|LS|MultiEdit|TodoWrite)\b", r) for r in left_out
    )
    shadowed = [p for p in catalog.problems if "shadowed by" in p.reason]
    assert len(catalog.roles) == 562 and len(shadowed) == 77  # 639 roles, 562 distinct names
    assert catalog.ignored_fields()["skills"] == 33
    section = roles_section(catalog)
    assert estimate_text_tokens(section) < 2500, estimate_text_tokens(section)
    assert "FindRole" in section


def test_xbot_role_files_keep_capabilities_tiers_and_tools() -> None:
    catalog = RoleCatalog.load([CORPUS / "CjiW__xbot"])
    assert catalog.problems == []
    roles = catalog.roles
    assert sorted(roles) == ["brainstorm", "code-reviewer", "explore", "explorer", "tester"]
    assert roles["brainstorm"].capabilities == {"memory"}  # spawn_agent: false is honoured
    assert roles["explore"].model == "anthropic:claude-haiku-4-5"  # tier swift
    assert roles["explore"].tools == ("Grep", "Glob", "Read", "Bash", "Write", "Edit")
    for name in ("code-reviewer", "explore", "explorer", "tester"):
        assert roles[name].can("spawn_agent") and "Bash" in (roles[name].tools or ())


def test_the_repositories_install_layouts_under_home_claude_agents_are_found(
    tmp_path: Path,
) -> None:
    rows = re.findall(r"^\| ([^|]+?\.md) \| ([^|]+) \| `([^`]+)` \|$",
                      (CORPUS / "SOURCES.md").read_text(encoding="utf-8"), re.M)  # fmt: skip
    assert len(rows) == 645
    agents = tmp_path / "me" / ".claude" / "agents"
    for corpus_file, repo, path in rows:
        target = agents / repo.strip().replace("/", "__") / path
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(CORPUS / corpus_file, target)
    dirs = role_dirs(tmp_path / "ws", tmp_path / "retinue-home", tmp_path / "me")
    catalog = RoleCatalog.load(dirs[:-1])  # without the packaged examples
    found = {str(d): n for d, n in catalog.searched}
    assert found[str(agents)] == 645
    assert len(catalog.errors()) == 4
