"""Claude Code's sub-agent fields at run time (issue 27): what a role's file makes it do."""

from __future__ import annotations

from pathlib import Path

from subagent_kit import Kit, RecordingMemory

from retinue.messages import UserMessage
from retinue.subagents import RoleCatalog, SubAgentManager, parse_role
from retinue.testing import ScriptedModel, call_tool
from retinue.tools import ToolRegistry


def role_text(name: str, *front: str, body: str = "p") -> str:
    return "\n".join(["---", f"name: {name}", "description: d", *front, "---", body])


def kit_of(tmp_path: Path, *texts: str) -> tuple[Kit, ScriptedModel]:
    model = ScriptedModel(name="scripted:shared")
    roles = [parse_role(tmp_path / "r.md", t) for t in texts]
    manager = SubAgentManager(RoleCatalog.of(*roles), ToolRegistry([]), default_model=model)
    return Kit(manager, {}, RecordingMemory(), tmp_path), model


def test_restricted_tools_in_a_capabilities_mapping_means_no_delegation() -> None:
    """Seven real files say ``capabilities: {restricted_tools: Task  # No delegation}``; such
    a mapping is not xbot's (its keys are not xbot's), and Task is disallowed."""
    text = role_text("worker", "capabilities:", "  restricted_tools: Task  # No delegation")
    role = parse_role(Path("w.md"), text)
    assert not role.can("spawn_agent")
    assert any("restricted_tools" in n for n in role.notes)
    xbot = parse_role(Path("x.md"), role_text("x", "capabilities:", "  memory: true"))
    assert xbot.can("spawn_agent") and xbot.can("memory")  # plainly xbot: spawn on by default


def test_mcp_patterns_in_tools_and_disallowed_tools() -> None:
    role = parse_role(
        Path("m.md"),
        role_text("m", "tools: Read, mcp__github__*", "disallowedTools: mcp__*, mcp__x__rm_*"),
    )
    assert role.tools == ("Read", "mcp__github") and not role.can("spawn_agent")
    assert role.disallowed == ("mcp__*", "mcp__x__rm_*")  # applied by the MCP source
    catalog = RoleCatalog.of(role)
    catalog.check_tools(["Read"], ["github"])
    assert catalog.problems == []  # the whole server counts as known


def test_names_claude_code_skips_are_skipped_and_reported(tmp_path: Path) -> None:
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "a.md").write_text(role_text("plugin:reviewer"))
    (folder / "b.md").write_text(role_text("-reviewer"))
    (folder / "c.md").write_text(role_text("reviewer"))
    catalog = RoleCatalog.load([folder])
    assert list(catalog.roles) == ["reviewer"]
    assert sorted(p.path.name for p in catalog.errors()) == ["a.md", "b.md"]
    assert all("Claude Code skips" in p.reason for p in catalog.errors())


async def test_a_role_without_tools_delegates_and_nests_to_the_depth_limit(
    tmp_path: Path,
) -> None:
    kit, model = kit_of(tmp_path, *(role_text(n) for n in "abcd"))
    model.add(
        call_tool("SubAgent", {"task": "go b", "role": "b"}),  # a (depth 1)
        call_tool("SubAgent", {"task": "go c", "role": "c"}),  # b (depth 2)
        call_tool("SubAgent", {"task": "go d", "role": "d"}),  # c (depth 3): the limit
        "c done",
        "b done",
        "a done",
    )
    main = ScriptedModel([call_tool("SubAgent", {"task": "go a", "role": "a"}), "main done"])
    out = await kit.run_main(main, "start")
    assert out.content == "main done"
    assert len(model.calls) == 6 and all("SubAgent" in c.tool_names for c in model.calls)
    told = model.calls[3].messages[-1].content  # c reads why d did not start
    assert "nesting depth limit 3 reached" in told and "main -> a -> b -> c" in told
    assert main.calls[1].messages[-1].content == "a done"


async def test_initial_prompt_opens_the_first_turn_and_background_roles_run_in_background(
    tmp_path: Path,
) -> None:
    kit, model = kit_of(
        tmp_path,
        role_text("greeter", "tools: Read", "initialPrompt: Read the README first."),
        role_text("bg", "tools: Read", "background: true"),
    )
    model.add("hello", "later")
    ctx = kit.ctx()
    await kit.manager.delegate(ctx, task="say hi", role="greeter")
    first = [m for m in model.calls[0].messages if isinstance(m, UserMessage)]
    assert first[0].content == "Read the README first.\n\nsay hi"
    note = await kit.manager.delegate(ctx, task="work", role="bg")  # one-shot asked for
    assert "in the background" in note and "SubAgentStatus" in note
    status = await kit.manager.poll(ctx, "bg", wait=True)
    assert "later" in status
    await kit.manager.cleanup("main")


def test_an_mcp_source_applies_a_roles_disallowed_patterns() -> None:
    """``disallowedTools: mcp__*`` keeps every server from starting for the role, and a
    ``*`` pattern drops the tools it matches (retinue.mcp.tools)."""
    from retinue.mcp.tools import _dropped, _may_use

    role = parse_role(Path("m.md"), role_text("m", "disallowedTools: mcp__*"))
    assert not _may_use("github", [], frozenset(role.disallowed))
    assert _may_use("github", [], frozenset({"mcp__slack"}))
    drops = frozenset(
        parse_role(Path("m.md"), role_text("m", "disallowedTools: mcp__gh__rm_*")).disallowed
    )
    assert _dropped("mcp__gh__rm_repo", drops) and not _dropped("mcp__gh__list", drops)


def test_notes_of_every_field_reach_the_role(tmp_path: Path) -> None:
    text = (
        "---\nname: noted\ndescription: d\nmaxTurns: -1\nskills: 3\ninitialPrompt: 7\n"
        "background: maybe\nisolation: vm\n---\nbody\n"
    )
    role = parse_role(tmp_path / "noted.md", text)
    said = "\n".join(role.notes)
    for what in ("maxTurns", "'skills'", "initialPrompt", "background", "isolation"):
        assert what in said, what
