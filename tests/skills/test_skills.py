"""Agent Skills: discovery and precedence, untrusted files, the prompt section, the Skill tool,
preloading into a sub-agent and allowed-tools, and ``retinue skills``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from retinue.errors import ToolError
from retinue.policy.gate import Policy
from retinue.skills import SkillCatalog, parse_skill, skill_dirs, skill_tool, skills_section
from retinue.skills.catalog import MAX_LISTED_SKILLS, SKILLS_BUDGET_CHARS
from retinue.skills.tool import read_skill_file
from retinue.subagents import Role, RoleCatalog, SubAgentManager
from retinue.subagents.role_files import MAX_FILE_BYTES
from retinue.testing import ScriptedModel
from retinue.tools import ToolContext, ToolRegistry, tool

SKILLS_CORPUS = Path(__file__).resolve().parents[3] / "shared" / "skills-corpus"


def write_skill(root: Path, name: str, *front: str, body: str = "Do it well.") -> Path:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    head = [f"name: {name}", f"description: the {name} skill", *front]
    (folder / "SKILL.md").write_text("\n".join(["---", *head, "---", body]))
    return folder


def test_personal_skills_win_over_project_ones_and_shadowing_is_reported(tmp_path: Path) -> None:
    ws, home, me = tmp_path / "ws", tmp_path / "retinue-home", tmp_path / "me"
    dirs = skill_dirs(ws, home, me)
    # personal before project, as Claude Code ranks them ("enterprise > personal > project")
    assert dirs == [
        home / "skills",
        me / ".claude" / "skills",
        ws / ".retinue" / "skills",
        ws / ".claude" / "skills",
    ]
    write_skill(me / ".claude" / "skills", "pdf", body="USER pdf")
    write_skill(ws / ".claude" / "skills", "pdf", body="PROJECT pdf")
    write_skill(ws / ".retinue" / "skills", "lint")
    write_skill(home / "skills" / "plugin" / "skills", "tdd")  # a plugin's skills/ folder
    catalog = SkillCatalog.load(dirs)
    assert sorted(catalog.skills) == ["lint", "pdf", "tdd"]
    assert catalog.skills["pdf"].body == "USER pdf"  # the project's does not shadow the user's
    shadowed = [p for p in catalog.problems if "shadowed by" in p.reason]
    assert len(shadowed) == 1 and shadowed[0].path == ws / ".claude" / "skills" / "pdf" / "SKILL.md"


def test_untrusted_files_one_bad_skill_is_reported_and_skipped(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_skill(root, "good")
    (root / "fifo").mkdir(parents=True)
    os.mkfifo(root / "fifo" / "SKILL.md")
    (root / "zero").mkdir()
    (root / "zero" / "SKILL.md").symlink_to("/dev/zero")
    (root / "huge").mkdir()
    (root / "huge" / "SKILL.md").write_text("---\nname: huge\n---\n" + "x" * MAX_FILE_BYTES)
    (root / "deep").mkdir()
    (root / "deep" / "SKILL.md").write_text("---\nname: deep\ndescription: " + "[" * 5000)
    (root / "bin").mkdir()
    (root / "bin" / "SKILL.md").write_bytes(b"---\nname: bin\n\xff\xfe---\n")
    (root / "Bad Name").mkdir()
    (root / "Bad Name" / "SKILL.md").write_text("---\nname: Bad Name!\ndescription: d\n---\n")
    catalog = SkillCatalog.load([root])
    assert list(catalog.skills) == ["good"]
    reasons = {p.path.parent.name: p.reason for p in catalog.errors()}
    assert set(reasons) == {"fifo", "zero", "huge", "deep", "bin", "Bad Name"}
    assert "not a regular file" in reasons["fifo"] and "too large" in reasons["huge"]
    assert "invalid skill name" in reasons["Bad Name"]


def test_front_matter_as_the_specification_and_claude_code_write_it(tmp_path: Path) -> None:
    folder = tmp_path / "git-helper"
    folder.mkdir()
    space = parse_skill(folder, "---\ndescription: d\nallowed-tools: Read Bash(git:*) Grep\n---\nB")
    assert space.name == "git-helper" and "folder's name" in space.notes[0]
    assert space.allowed_tools == ("Read", "Bash(git:*)", "Grep") and space.body == "B"
    comma = parse_skill(
        folder, "---\nname: git-helper\ndescription: d\nallowed-tools: Read, Edit\n---\n"
    )
    assert comma.allowed_tools == ("Read", "Edit") and comma.notes == ()
    listed = parse_skill(
        folder, "---\nname: other\ndescription: d\nallowed-tools: [Read]\nlicense: MIT\n---\n"
    )
    assert listed.allowed_tools == ("Read",) and listed.license == "MIT"
    assert "differs from its folder" in listed.notes[0]
    assert parse_skill(folder, "---\nname: git-helper\ndescription: d\n---\n").allowed_tools is None


def test_the_prompt_lists_names_and_descriptions_within_a_budget() -> None:
    few = SkillCatalog.of(
        *(
            parse_skill(Path(f"s{i}"), f"---\nname: s{i}\ndescription: does {i}\n---\nBODY")
            for i in range(3)
        )
    )
    section = skills_section(few)
    assert "- s1: does 1" in section and "Skill(name)" in section and "BODY" not in section
    many = SkillCatalog.of(
        *(
            parse_skill(Path(f"k{i}"), f"---\nname: k{i}\ndescription: {'word ' * 200}\n---\n")
            for i in range(MAX_LISTED_SKILLS * 70)
        )
    )
    bounded = skills_section(many)
    assert len(bounded) < SKILLS_BUDGET_CHARS + 400 and "word" not in bounded
    assert "k0, k1" in bounded and "more" in bounded
    assert skills_section(SkillCatalog()) == ""


async def test_the_skill_tool_loads_a_body_and_reads_files_of_its_folder_only(
    tmp_path: Path,
) -> None:
    folder = write_skill(tmp_path / "skills", "pdf", "allowed-tools: Read", body="See reference.md")
    (folder / "reference.md").write_text("REFERENCE")
    (folder / "scripts").mkdir()
    (folder / "scripts" / "fill.py").write_text("print(1)")
    (tmp_path / "secret.txt").write_text("SECRET")
    (folder / "link.txt").symlink_to(tmp_path / "secret.txt")
    catalog = SkillCatalog.load([tmp_path / "skills"])
    t = skill_tool(catalog)
    ctx = ToolContext("main", tmp_path, tmp_path)
    body = await t.invoke(ctx, '{"name": "pdf"}')
    assert "See reference.md" in body and "reference.md, scripts/fill.py" in body
    assert "Its allowed-tools (pre-approved where a role preloads it): Read." in body
    assert await t.invoke(ctx, '{"name": "pdf", "file": "reference.md"}') == "REFERENCE"
    skill = catalog.skills["pdf"]
    for escape in ("../../secret.txt", "link.txt", "/etc/hostname", "."):
        with pytest.raises(ToolError, match="not inside the folder"):
            read_skill_file(skill, escape)
    with pytest.raises(ToolError, match="no skill 'pdf-tools'; similar: pdf"):
        await t.invoke(ctx, '{"name": "pdf-tools"}')


def _make(name: str):
    @tool(name)
    def t(ctx: ToolContext) -> str:
        """Does nothing."""
        return name

    return t


async def test_a_role_preloads_skills_and_their_allowed_tools_take_nothing_away(
    tmp_path: Path,
) -> None:
    """allowed-tools means pre-approved (the specification, Claude Code), not "only these":
    a role preloading such a skill keeps Write and Edit; disallowed-tools removes tools."""
    root = tmp_path / "skills"
    write_skill(root, "review", "allowed-tools: Read Grep", body="REVIEW STEPS")
    write_skill(root, "notes", "disallowed-tools: Bash", body="NOTES STEPS")
    catalog = SkillCatalog.load([root])
    tools = ToolRegistry([_make(n) for n in ("Read", "Grep", "Bash", "Write", "Edit")])
    reviewer = Role("reviewer", "d", "p", skills=("review", "missing"))
    noted = Role("noted", "d", "p", skills=("notes",))
    mgr = SubAgentManager(RoleCatalog.of(reviewer, noted), tools, default_model=ScriptedModel())
    mgr.factory.skills, mgr.factory.skill_tool = catalog, skill_tool(catalog)
    mgr.factory.instructions = "## Project instructions\nUSE TABS"
    events: list[object] = []
    ctx = ToolContext("main/reviewer", tmp_path, tmp_path, role="reviewer", events=events.append)
    prompt = await mgr.factory.system_prompt(reviewer, ctx)
    assert "REVIEW STEPS" in prompt and "USE TABS" in prompt
    assert any("'missing', which is not installed" in str(e) for e in events)
    names = set(mgr.factory.tools_for(reviewer).names)
    assert {"Read", "Grep", "Bash", "Write", "Edit", "Skill"} <= names
    assert set(mgr.factory.tools_for(noted).names) == {"Read", "Grep", "Write", "Edit", "Skill"}


def test_a_preloaded_skills_allowed_tools_are_pre_approved_for_that_role_only(
    tmp_path: Path,
) -> None:
    root = tmp_path / "skills"
    write_skill(
        root, "git", "allowed-tools: Bash(git status:*) Write", "disallowed-tools: Bash(rm:*)"
    )
    catalog = SkillCatalog.load([root])
    tools = ToolRegistry([_make(n) for n in ("Read", "Bash", "Write")])
    with_skill, plain = Role("gitter", "d", "p", skills=("git",)), Role("plain", "d", "p")
    mgr = SubAgentManager(RoleCatalog.of(with_skill, plain), tools, default_model=ScriptedModel())
    mgr.factory.skills, mgr.factory.skill_tool = catalog, skill_tool(catalog)
    policy = Policy(modes=("default",), sandboxed=False)  # nobody to approve: ask is refused
    parent = ToolContext("main", tmp_path, tmp_path, gate=policy)

    def decide(role: Role, tool: str, args: dict[str, str]) -> str:
        ctx = mgr.factory.config(role, parent, interactive=False).context
        assert isinstance(ctx.gate, Policy)
        return ctx.gate.decide(tool, args, ctx)[0]

    write = {"file_path": str(tmp_path / "a.txt"), "content": "x"}
    assert decide(with_skill, "Write", write) == "allow"
    assert decide(with_skill, "Bash", {"command": "git status --short"}) == "allow"
    assert decide(with_skill, "Bash", {"command": "git push"}) == "ask"  # not pre-approved
    assert decide(with_skill, "Bash", {"command": "rm -rf x"}) == "deny"  # disallowed-tools
    assert decide(plain, "Write", write) == "ask"  # the parent's policy is unchanged
    assert policy.decide("Write", write, parent)[0] == "ask"
    assert policy.rules.allow == []


def test_a_skill_named_with_spaces_loads_under_its_folders_name(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    (root / "agent-development").mkdir(parents=True)
    (root / "agent-development" / "SKILL.md").write_text(
        "---\nname: Agent Development\ndescription: builds agents\n---\nSTEPS"
    )
    catalog = SkillCatalog.load([root])
    assert list(catalog.skills) == ["agent-development"] and catalog.errors() == []
    assert "folder's name 'agent-development' is used" in catalog.problems[0].reason


async def test_disable_model_invocation_keeps_a_skill_from_the_model(tmp_path: Path) -> None:
    root = tmp_path / "skills"
    write_skill(root, "prune-branches", "disable-model-invocation: true", body="DELETE BRANCHES")
    write_skill(root, "lint", "disable-model-invocation: false")
    catalog = SkillCatalog.load([root])
    assert sorted(catalog.skills) == ["lint", "prune-branches"]  # loaded, listed for the user
    section = skills_section(catalog)
    assert "lint" in section and "prune-branches" not in section
    t = skill_tool(catalog)
    ctx = ToolContext("main", tmp_path, tmp_path)
    with pytest.raises(ToolError, match="for the user to invoke"):
        await t.invoke(ctx, '{"name": "prune-branches"}')
    with pytest.raises(ToolError, match=r"known: lint$"):
        await t.invoke(ctx, '{"name": "other"}')
    pruner = Role("pruner", "d", "p", skills=("prune-branches",))
    mgr = SubAgentManager(RoleCatalog.of(pruner), ToolRegistry(), default_model=ScriptedModel())
    mgr.factory.skills, mgr.factory.skill_tool = catalog, t
    events: list[object] = []
    rctx = ToolContext("main/pruner", tmp_path, tmp_path, role="pruner", events=events.append)
    assert "DELETE BRANCHES" not in await mgr.factory.system_prompt(pruner, rctx)
    assert any("for the user to invoke" in str(e) for e in events)


@pytest.mark.skipif(not SKILLS_CORPUS.is_dir(), reason=f"skills corpus not at {SKILLS_CORPUS}")
def test_the_real_skills_corpus_loads() -> None:
    catalog = SkillCatalog.load([SKILLS_CORPUS])
    assert len(catalog.skills) == 26 and catalog.errors() == []
    # one real description is longer than the specification's 1024 characters
    assert [p.path.parent.name for p in catalog.problems] == ["claude-api"]
    assert all(s.body for s in catalog.skills.values())


def test_retinue_skills_lists_sources_and_problems(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write_skill(ws / ".claude" / "skills", "lint", "allowed-tools: Bash(ruff:*)")
    write_skill(ws / ".claude" / "skills", "prune", "disable-model-invocation: true")
    (ws / ".claude" / "skills" / "broken").mkdir()
    (ws / ".claude" / "skills" / "broken" / "SKILL.md").write_text("---\nname: broken\n---\n[red]x")
    (ws / "CLAUDE.md").write_text("rules")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RETINUE_"))}
    env |= {"RETINUE_HOME": str(tmp_path / "home"), "HOME": str(tmp_path / "me")}
    done = subprocess.run(
        [sys.executable, "-m", "retinue", "skills", "--workspace", str(ws)],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "lint" in done.stdout and "2 skills." in done.stdout
    assert "pre-approved tools" in done.stdout and "Bash(ruff:*)" in done.stdout
    assert "prune (user only)" in done.stdout
    assert (
        "skipped:" in done.stderr
        and "broken" in done.stderr
        and "'description' is required" in done.stderr
    )
    assert f"project instructions: {ws / 'CLAUDE.md'}" in " ".join(done.stderr.split())
