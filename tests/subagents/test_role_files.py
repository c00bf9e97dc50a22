"""Reading role files: recursive discovery, hostile files refused one by one, lenient YAML."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from retinue.errors import RoleError
from retinue.subagents import RoleCatalog
from retinue.subagents.role_files import (
    MAX_FILE_BYTES,
    find_role_files,
    read_role_file,
    split_front_matter,
)

GOOD = "---\nname: {name}\ndescription: d\n---\nbody\n"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_discovery_is_recursive_sorted_and_survives_a_link_cycle(tmp_path: Path) -> None:
    root = tmp_path / "agents"
    write(root / "b.md", GOOD.format(name="b"))
    write(root / "team" / "deep" / "c.md", GOOD.format(name="c"))
    write(root / "a.md", GOOD.format(name="a"))
    write(root / "notes.txt", "not a role")
    write(root / ".git" / "h.md", GOOD.format(name="h"))
    write(root / ".claude" / "agents" / "d.md", GOOD.format(name="d"))
    (root / "team" / "loop").symlink_to(root, target_is_directory=True)
    found = [p.relative_to(root).as_posix() for p in find_role_files(root)]
    assert found == ["a.md", "b.md", ".claude/agents/d.md", "team/deep/c.md"]
    assert list(find_role_files(tmp_path / "missing")) == []


def test_fifo_device_link_oversize_and_non_utf8_are_refused_not_waited_on(tmp_path: Path) -> None:
    root = tmp_path / "agents"
    write(root / "ok.md", GOOD.format(name="ok"))
    os.mkfifo(root / "fifo.md")
    (root / "zero.md").symlink_to("/dev/zero")
    (root / "big.md").write_bytes(b"---\nname: big\n" + b"x" * MAX_FILE_BYTES)
    (root / "latin.md").write_bytes(GOOD.format(name="caf\xe9").encode("latin-1"))
    catalog = RoleCatalog.load([root])
    assert list(catalog.roles) == ["ok"]
    reasons = {p.path.name: p.reason for p in catalog.problems}
    assert reasons["fifo.md"] == reasons["zero.md"] == "not a regular file (skipped)"
    assert reasons["big.md"].startswith("file too large")
    assert reasons["latin.md"].startswith("not UTF-8 text")
    assert all(p.severity == "error" for p in catalog.problems)
    with pytest.raises(RoleError, match="cannot open"):
        read_role_file(root / "absent.md")


@pytest.mark.parametrize(
    ("front", "reason"),
    [
        ("name: x\ndescription: d\ntools: " + "[" * 20000 + "]" * 20000, "nested deeper"),
        (
            "a: &a [x, x, x, x, x, x, x, x, x]\n"
            + "".join(
                f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n"
                for p, c in zip("abcdefgh", "bcdefghi", strict=True)
            )
            + "name: x\ndescription: d\ntools: *i\n",
            "YAML aliases",
        ),
    ],
)
def test_yaml_depth_and_alias_bombs_are_bounded(front: str, reason: str) -> None:
    with pytest.raises(RoleError, match=reason):
        split_front_matter(f"---\n{front}\n---\nbody")


def test_an_unquoted_colon_in_a_one_line_value_reads_as_text() -> None:
    text = (
        "---\nname: planner\ndescription: Use this agent when: plans need review. Example: x\n"
        "model: opus\n---\nbody"
    )
    meta, notes, body = split_front_matter(text)
    assert meta["description"] == "Use this agent when: plans need review. Example: x"
    assert meta["model"] == "opus" and body == "body"
    assert notes == [
        "front matter is not strict YAML; read with description quoted, as Claude Code does"
    ]
    # what quoting cannot mend is still an error, and a flow list is never quoted
    for broken in ("description: d\n- stray item", "description: [a: b"):
        with pytest.raises(RoleError, match="invalid YAML"):
            split_front_matter(f"---\nname: x\n{broken}\n---\n")


@pytest.mark.parametrize(
    "value",
    [
        "**TECHNICAL DESIGN SPECIALIST**: designs systems",  # one popular collection's files
        "*Expert* reviewer",
        "&amp; friends",
        "!important reviewer",
        "%TAG-like text",
        "@mentions the team",
        "`code` reviewer: reads diffs",
        "ends with a colon:",
        'has "quotes" and a \\ backslash: kept',
    ],
)
def test_claude_codes_retry_quotes_values_strict_yaml_refuses(value: str) -> None:
    """Claude Code quotes such values and parses again; a file it loads must load here."""
    text = f"---\nname: designer\ndescription: {value}\ntools: [Read, Grep]\n---\nbody"
    meta, notes, _ = split_front_matter(text)
    assert meta["description"] == value
    assert meta["tools"] == ["Read", "Grep"]  # a flow list stays a list
    assert "description quoted" in notes[0]


def test_the_retry_folds_continuation_lines_and_leaves_lists_and_blocks_alone() -> None:
    text = (
        "---\nname: a\ndescription: **Designs**: systems\n  and reviews: them\n"
        "tools: [Read, Grep]\nskills:\n  - one\nhooks: {x: 1}\nnote: |\n  kept: as is\n"
        "model: 'sonnet'\n---\n"
    )
    meta, _, _ = split_front_matter(text)
    assert meta["description"] == "**Designs**: systems and reviews: them"
    assert meta["tools"] == ["Read", "Grep"] and meta["skills"] == ["one"]
    assert meta["hooks"] == {"x": 1} and meta["note"] == "kept: as is\n"
    assert meta["model"] == "sonnet"


def test_front_matter_closing_line_may_be_longer_and_bom_is_dropped() -> None:
    meta, notes, body = split_front_matter(
        "\ufeff---\n\nname: x\ndescription: d\n" + "-" * 40 + "\n# Body"
    )
    assert meta == {"name": "x", "description": "d"} and notes == [] and body == "# Body"
    with pytest.raises(RoleError, match="no front matter"):
        split_front_matter("\n    ---\n    name: x\n    ---\n")
