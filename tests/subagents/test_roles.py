"""Role files: both front-matter dialects, precedence, broken files reported by path."""

from __future__ import annotations

from pathlib import Path

import pytest

from retinue.config import DEFAULT_MODEL_ALIASES
from retinue.errors import RoleError
from retinue.subagents import RoleCatalog, parse_role, role_dirs


def problems_of(catalog: RoleCatalog, filename: str) -> list[tuple[str, str]]:
    return [(p.severity, p.reason) for p in catalog.problems if p.path.name == filename]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_retinue_role_with_list_tools_and_capabilities() -> None:
    role = parse_role(
        Path("r.md"),
        "---\nname: reviewer\ndescription: Reviews code.\ntools:\n  - Read\n  - Grep\n"
        "model: openai:gpt-4o-mini\ncapabilities: [memory, spawn_agent]\n---\nBe strict.\n",
    )
    assert role.name == "reviewer" and role.prompt == "Be strict."
    assert role.tools == ("Read", "Grep")
    assert role.model == "openai:gpt-4o-mini"
    assert role.can("memory") and role.can("spawn_agent")


def test_claude_code_format_is_read_unchanged() -> None:
    text = (
        "---\nname: code-reviewer\ndescription: Expert code review specialist.\n"
        "tools: Read, Grep, Glob, Bash\nmodel: sonnet\ncolor: blue\n---\n\nYou review code.\n"
    )
    role = parse_role(Path("c.md"), text, DEFAULT_MODEL_ALIASES)
    assert role.tools == ("Read", "Grep", "Glob", "Bash")
    assert role.model == DEFAULT_MODEL_ALIASES["sonnet"]
    inherit = parse_role(Path("c.md"), text.replace("model: sonnet", "model: inherit"))
    assert inherit.model is None
    no_tools = text.replace("tools: Read, Grep, Glob, Bash\n", "")
    assert parse_role(Path("c.md"), no_tools, DEFAULT_MODEL_ALIASES).tools is None


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("no front matter", "no front matter"),
        ("---\nname: x\ndescription: [unclosed\n---\nbody", "invalid YAML"),
        ("---\nname: x\n---\nbody", "'description' is required"),
        ("---\ndescription: d\n---\nbody", "'name' is required"),
        ("---\nname: '!!!'\ndescription: d\n---\n", "invalid role name"),
        ("---\nname: x\ndescription: d\n", "not closed"),
        ("---\n- a\n- b\n---\n", "must be a mapping"),
        ("---\nname: x\ndescription: d\ntools: {a: 1}\n---\n", "'tools' must be a list"),
    ],
)
def test_broken_role_says_why(text: str, reason: str) -> None:
    with pytest.raises(RoleError, match=reason):
        parse_role(Path("x.md"), text)


def test_catalog_precedence_broken_files_and_unknown_tools(tmp_path: Path) -> None:
    ws, home = tmp_path / "ws", tmp_path / "home"
    project, user, claude, _user_claude, _packaged = role_dirs(ws, home, tmp_path / "me")
    write(project / "reviewer.md", "---\nname: reviewer\ndescription: project one\n---\nP")
    write(user / "reviewer.md", "---\nname: reviewer\ndescription: user one\n---\nU")
    write(user / "broken.md", "---\nname: [\n---\n")
    write(claude / "helper.md", "---\nname: helper\ndescription: h\ntools: Read, Fly\n---\nH")
    write(claude / "only-fly.md", "---\nname: only-fly\ndescription: h\ntools: Fly\n---\nH")
    catalog = RoleCatalog.load(role_dirs(ws, home, tmp_path / "me"))
    assert catalog.get("reviewer").description == "project one"
    assert catalog.get("helper").source == claude / "helper.md"
    assert {"code-reviewer", "researcher", "tester"} <= set(catalog.roles)  # shipped examples
    problems = {p.path.name: p for p in catalog.problems}
    assert problems["broken.md"].severity == "error"
    assert "shadowed by" in problems["reviewer.md"].reason
    assert problems["reviewer.md"].severity == "warning"
    catalog.check_tools(["Read", "Grep"])
    assert any("Fly" in p.reason for p in catalog.problems if p.path.name == "helper.md")
    assert "only-fly" not in catalog.roles  # no usable tool at all: an error, not a bare run
    assert problems_of(catalog, "only-fly.md") == [
        ("error", "no usable tool, [Fly] are unknown here; not loaded")
    ]
    with pytest.raises(RoleError, match=r"unknown role 'nope'; available roles: .*reviewer"):
        catalog.get("nope")
    assert "- reviewer: project one" in catalog.describe()
