"""The store behind the real sub-agent manager: unload, cleanup and one-shot consolidate;
the next session of the role starts with what the last one learned."""

from pathlib import Path

from retinue.memory import MemoryBackend
from retinue.messages import AssistantMessage
from retinue.subagents import Role, RoleCatalog, SubAgentManager
from retinue.testing import ScriptedModel, call_tool
from retinue.tools import ToolContext, ToolRegistry
from retinue.tools.builtin.memory import memory_tools


def setup(tmp_path: Path, store: MemoryBackend) -> tuple[SubAgentManager, ScriptedModel]:
    scout = ScriptedModel(name="scripted:scout")
    role = Role("scout", "finds things", "You are scout.", None, "scripted:scout",
                frozenset({"memory"}))  # fmt: skip
    manager = SubAgentManager(
        RoleCatalog.of(role),
        ToolRegistry(),
        default_model=ScriptedModel(name="scripted:default"),
        model_for=lambda _: scout,
        memory=store,
        memory_tools=memory_tools(),
    )
    return manager, scout


def ctx(tmp_path: Path, manager: SubAgentManager) -> ToolContext:
    return ToolContext("main", tmp_path, tmp_path, tenant="acme", call_chain=("main",),
                       manager=manager)  # fmt: skip


def memorize(human: str) -> AssistantMessage:
    return call_tool("memorize", {"block_updates": [{"block": "human", "value": human}]})


async def test_unload_consolidates_and_the_next_session_recalls(
    tmp_path: Path, store: MemoryBackend
) -> None:
    manager, scout = setup(tmp_path, store)
    scout.add("Hello Ann.", memorize("The user is Ann."))
    await manager.interactive_subagent(ctx(tmp_path, manager), "I am Ann", "scout")
    assert "Ann" not in await store.render("acme", "scout")  # a pause consolidates nothing
    await manager.unload_subagent("main", "scout")
    assert "The user is Ann." in await store.render("acme", "scout")
    assert scout.calls[-1].tool_names == ["memorize"]

    scout.add("You are Ann.", memorize("The user is Ann (asked twice)."))
    out = await manager.run_subagent(ctx(tmp_path, manager), "who am I?", "scout")
    assert out.content == "You are Ann."
    assert "The user is Ann." in scout.calls[-2].messages[0].content  # in its system prompt
    assert "asked twice" in await store.render("acme", "scout")
    assert "Ann" not in await store.render("default", "scout")  # other tenant
    scout.assert_done()


async def test_parent_cleanup_consolidates_each_session_once(
    tmp_path: Path, store: MemoryBackend
) -> None:
    manager, scout = setup(tmp_path, store)
    scout.add("ok", memorize("Knows about the cleanup."))
    await manager.interactive_subagent(ctx(tmp_path, manager), "remember cleanup", "scout")
    await manager.cleanup("main")
    await manager.cleanup("main")  # nothing left: no second consolidation
    assert "Knows about the cleanup." in await store.render("acme", "scout")
    assert scout.call_count == 2
    scout.assert_done()
