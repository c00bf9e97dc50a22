"""What each front matter field means: Claude Code's and xbot's dialects as those tools read
them, and how a role becomes a run (tools, disallowed tools, delegation, model, turns)."""

from __future__ import annotations

from pathlib import Path

import pytest

from retinue.errors import ConfigError, SubAgentError
from retinue.events import NOTICE, Event
from retinue.llm.base import Model
from retinue.subagents import Role, RoleCatalog, SubAgentManager, parse_role
from retinue.subagents.tools import MAX_LISTED_ROLES, ROLES_BUDGET_CHARS, roles_section
from retinue.testing import ScriptedModel
from retinue.tools import ToolContext, ToolRegistry, tool


def role(front: str, aliases: dict[str, str] | None = None) -> Role:
    return parse_role(Path("r.md"), f"---\nname: r\ndescription: d\n{front}\n---\nbody", aliases)


def _make(name: str):  # a do-nothing tool per name, so registries hold real Tool objects
    @tool(name)
    def t(ctx: ToolContext) -> str:
        """Does nothing."""
        return name

    return t


TOOLS = ToolRegistry([_make(n) for n in ("Read", "Write", "Edit", "Glob", "Grep", "Bash")])


def manager(*roles: Role, model_for=None, default: Model | None = None) -> SubAgentManager:
    return SubAgentManager(
        RoleCatalog.of(*roles),
        TOOLS,
        default_model=default or ScriptedModel(name="scripted:main"),
        model_for=model_for,
    )


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("claude-sonnet-4-20250514", "anthropic:claude-sonnet-4-20250514"),
        ("gpt-4o-mini", "openai:gpt-4o-mini"),
        ("o3-mini", "openai:o3-mini"),
        ("openai:gpt-4.1", "openai:gpt-4.1"),
        ("sonnet", "anthropic:claude-sonnet-5-5"),
        ("Opus", "anthropic:claude-opus-5-5"),
        ("fable", "anthropic:claude-fable-5-2"),  # Claude Code: the top tier
        ("vanguard", "anthropic:claude-opus-5-5"),
        ("balance", "anthropic:claude-sonnet-5-5"),
        ("swift", "anthropic:claude-haiku-5-5"),
        ("weak", "anthropic:claude-haiku-5-5"),
        ("inherit", None),
    ],
)
def test_model_ids_aliases_and_tiers(model: str, expected: str | None) -> None:
    r = role(f"model: {model}")
    assert r.model == expected and r.notes == ()


def test_one_tier_table_the_user_sets_and_unknown_models_inherit() -> None:
    mine = {"haiku": "openai:gpt-4o-mini", "strong": "local:big"}
    assert role("model: swift", mine).model == "openai:gpt-4o-mini"  # tier -> alias -> model
    assert role("model: strong", mine).model == "local:big"
    unknown = role("model: gpt4")
    assert unknown.model is None and "runs on its parent's model" in unknown.notes[0]


def test_tools_comma_string_agent_entry_synonyms_and_disallowed() -> None:
    r = role("tools: Read, Grep, Agent(worker, researcher), Shell\ndisallowedTools: Bash")
    assert r.tools == ("Read", "Grep", "Bash")  # Shell is Bash; Agent(...) is not a tool here
    assert r.disallowed == ("Bash",)
    assert r.can("spawn_agent") and r.delegates == ("worker", "researcher")
    anyone = role("tools: [Read, Task]")
    assert anyone.can("spawn_agent") and anyone.delegates is None
    plain = role("tools: Read, Grep")
    assert not plain.can("spawn_agent")
    denied = role("tools: Read, Task\ndisallowedTools: [Task]")
    assert not denied.can("spawn_agent")


def test_read_only_reviewer_never_gets_write_edit_or_bash(tmp_path: Path) -> None:
    reviewer = role("disallowedTools:\n  - Edit\n  - Write\n  - Bash\n  - NotebookEdit")
    planner = role("permissionMode: plan")
    for r in (reviewer, planner):
        names = manager(r).factory.tools_for(r).names
        assert names[:3] == ["Read", "Glob", "Grep"]  # no tools list: every other tool,
        assert "SubAgent" in names and not {"Write", "Edit", "Bash"} & set(names)  # delegation


def test_capabilities_list_mapping_free_text_and_memory_scopes() -> None:
    assert role("capabilities: [memory, spawn_agent]").capabilities == {"memory", "spawn_agent"}
    xbot = role("capabilities:\n  memory: true\n  spawn_agent: false")
    assert xbot.capabilities == {"memory"}
    xbot_tools = role("tools:\n  - Read\n  - Shell")  # xbot: spawn_agent is on by default
    assert xbot_tools.can("spawn_agent") and xbot_tools.tools == ("Read", "Bash")
    free = role("capabilities: Designs REST APIs, reviews schemas")
    assert free.capabilities == {"spawn_agent"} and "free text" in free.notes[0]  # no tools
    for scope in ("user", "project", "local"):
        r = role(f"memory: {scope}")
        assert r.can("memory") and r.memory_scope == scope
    assert role("memory: true").can("memory")


def test_names_are_normalised_other_fields_ignored_and_listed() -> None:
    r = parse_role(
        Path("x.md"),
        "---\nname: Python DevOps/CI-CD Expert\ndescription: d\ncolor: red\nskills: [a]\n"
        "maxTurns: 7\n---\n",
    )
    assert r.name == "python-devops-ci-cd-expert"
    assert r.notes == ("name 'Python DevOps/CI-CD Expert' is used as 'python-devops-ci-cd-expert'",)
    assert r.ignored == ("color",) and r.max_turns == 7 and r.skills == ("a",)
    catalog = RoleCatalog.of(r)
    assert catalog.ignored_fields() == {"color": 1}


async def test_agent_entry_limits_whom_the_role_may_start(tmp_path: Path) -> None:
    lead = Role("lead", "d", "p", delegates=("worker",), capabilities=frozenset({"spawn_agent"}))
    mgr = manager(lead, Role("worker", "w", "p"), Role("other", "o", "p"))
    ctx = ToolContext("main/lead", tmp_path, tmp_path, role="lead", depth=1,
                      call_chain=("main", "lead"), manager=mgr)  # fmt: skip
    with pytest.raises(SubAgentError, match="may delegate only to worker"):
        mgr._admit(ctx, "other")
    assert mgr._admit(ctx, "worker").name == "worker"
    assert mgr.find_roles(ctx, "w worker") == "- worker: w"
    assert mgr.find_roles(ctx, "o").startswith("no role matches 'o'")
    prompt = await mgr.factory.system_prompt(lead, ctx)
    assert "- worker: w" in prompt and "other" not in prompt


def test_a_model_without_credentials_falls_back_to_the_main_model_once(tmp_path: Path) -> None:
    calls: list[str] = []

    def model_for(spec: str) -> Model:
        calls.append(spec)
        raise ConfigError("no API key for https://api.anthropic.com: set ANTHROPIC_API_KEY")

    events: list[Event] = []
    main = ScriptedModel(name="scripted:main")
    r = role("model: sonnet")
    mgr = manager(r, model_for=model_for, default=main)
    assert mgr.factory.model(r, events.append) is main
    assert mgr.factory.model(r, events.append) is main
    assert calls == ["anthropic:claude-sonnet-5-5"]
    assert [e.kind for e in events] == [NOTICE]
    assert "runs on scripted:main instead" in events[0].data["text"]


def test_many_roles_do_not_inflate_the_prompt() -> None:
    few = RoleCatalog.of(*(Role(f"r{i}", f"does thing {i}", "p") for i in range(3)))
    assert "- r2: does thing 2" in roles_section(few)
    long = "x" * 5000 + " <example>never shown</example>"
    many = RoleCatalog.of(
        *(Role(f"role-{i}", f"{long} topic{i}", "p") for i in range(MAX_LISTED_ROLES * 30))
    )
    section = roles_section(many)
    assert len(section) < ROLES_BUDGET_CHARS + 1000
    assert "FindRole" in section and "never shown" not in section
    assert [r.name for r in many.search("topic7")] == ["role-7"]


@pytest.mark.parametrize(
    ("front", "names", "delegates"),
    [
        ("tools:", set(), False),  # an empty value: no tool, no delegation (Claude Code)
        ('tools: ""', set(), False),
        ("tools: []", set(), False),
        ("tools: Read Grep Glob", {"Read", "Grep", "Glob"}, False),  # spaces, as Claude Code
        ("tools: Read,  Grep Bash(git status)", {"Read", "Grep", "Bash(git status)"}, False),
        ('tools: "*"', {"Read", "Write", "Edit", "Glob", "Grep", "Bash", "SubAgent"}, True),
        ("tools: ['*']", {"Read", "Write", "Edit", "Glob", "Grep", "Bash", "SubAgent"}, True),
    ],
)
def test_tools_empty_spaced_and_star_give_what_claude_code_gives(
    front: str, names: set[str], delegates: bool
) -> None:
    r = role(front)
    assert r.can("spawn_agent") is delegates
    given = set(manager(r).factory.tools_for(r).names)
    if "Bash(git status)" in names:  # a pattern names a tool of the registry, as written
        assert r.tools == ("Read", "Grep", "Bash(git status)")
    elif delegates:  # every tool, and the delegation tools with SubAgent
        assert names <= given
    else:
        assert given == names
    catalog = RoleCatalog.of(r)
    catalog.check_tools(TOOLS.names)
    assert "r" in catalog.roles  # loaded, not refused
