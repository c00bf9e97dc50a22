"""Shared memory blocks: declared in role files, seen in prompts, written by the memory tools
and consolidation only where the role may, kept per tenant, no concurrent write lost.

Every store test runs on SQLite and on PostgreSQL (skipped without it; see conftest.py).
"""

import asyncio
import json
import re
from collections.abc import Sequence
from pathlib import Path

import pytest

from retinue.llm.base import ToolSpec
from retinue.memory import MemoryBackend
from retinue.memory.store import SHARED_BLOCK_LIMIT, SharedBlock
from retinue.messages import AssistantMessage, Message, ToolCall, UserMessage
from retinue.subagents.roles import Role, parse_role
from retinue.testing import ScriptedModel, call_tool
from retinue.tools import ToolContext, ToolRegistry
from retinue.tools.builtin.memory import memory_tools

NOTES = SharedBlock("team-notes")
RULES = SharedBlock("house-rules", writable=False)
RULES_ON_NOTES = SharedBlock("team-notes", writable=False)  # team-notes, read-only
SESSION = [UserMessage("We chose PostgreSQL 17."), AssistantMessage("Noted.")]


def role(front: str) -> Role:
    return parse_role(Path("r.md"), f"---\nname: r\ndescription: d\n{front}\n---\nbody\n")


# -- role files -------------------------------------------------------------------------


def test_a_memory_mapping_declares_writable_and_read_only_shared_blocks() -> None:
    r = role("memory:\n  scope: project\n  shared: [team-notes, {name: house-rules, write: false}]")
    assert r.can("memory") and r.memory_scope == "project"
    assert r.shared_memory == (NOTES, RULES)
    assert r.notes == ()


def test_claude_codes_string_memory_still_means_memory_without_shared_blocks() -> None:
    for front, scope in (("memory: local", "local"), ("memory: true", None)):
        r = role(front)
        assert r.can("memory") and r.memory_scope == scope
        assert r.shared_memory == ()
    plain = role("memory: {shared: [team-notes]}")
    assert plain.can("memory") and plain.memory_scope is None
    assert plain.shared_memory == (NOTES,)


def test_wrong_shared_entries_are_reported_and_left_out() -> None:
    r = role(
        "memory:\n  shared: [human, 'a b', team-notes, team-notes, {name: x, write: maybe}]\n"
        "  color: red"
    )
    assert r.shared_memory == (NOTES, SharedBlock("x", False))
    notes = "\n".join(r.notes)
    assert "'human' cannot name a shared block" in notes
    assert "'a b' cannot name a shared block" in notes
    assert "names 'team-notes' twice" in notes
    assert "write 'maybe' of 'x' is not true or false (read-only)" in notes
    assert "memory.color is not scope or shared" in notes
    scoped = role("memory: {scope: team, shared: [team-notes]}")  # memory on, scope left out
    assert scoped.can("memory") and scoped.memory_scope is None
    assert scoped.shared_memory == (NOTES,)
    assert scoped.notes == ("memory.scope 'team' is not user, project or local (ignored)",)
    listed = role("memory: {shared: team-notes}")
    assert listed.shared_memory == ()
    assert "memory.shared is not a list" in listed.notes[0]


# -- the stores -------------------------------------------------------------------------


async def test_shared_blocks_are_shown_to_each_declaring_role_and_kept_per_tenant(
    store: MemoryBackend,
) -> None:
    await store.edit_shared_block("acme", "team-notes", lambda _: "Deploys on Fridays.")
    writer = await store.render("acme", "writer", [NOTES])
    reader = await store.render("acme", "reader", [SharedBlock("team-notes", False)])
    assert '<team-notes shared="writable" chars="19/4000">\nDeploys on Fridays.' in writer
    assert '<team-notes shared="read-only" chars="19/4000">\nDeploys on Fridays.' in reader
    assert "Deploys" not in await store.render("acme", "other")  # not declared: not shown
    assert "Deploys" not in await store.render("globex", "reader", [NOTES])  # another tenant
    assert [b.name for b in await store.shared_blocks("acme")] == ["team-notes"]
    assert await store.shared_blocks("globex") == []
    assert [b.name for b in await store.blocks("acme", "@shared")] == [
        "persona", "human", "working_context"
    ]  # fmt: skip
    assert all(not b.value for b in await store.blocks("acme", "@shared"))


async def test_a_shared_block_has_a_size_limit_and_a_name_rule(store: MemoryBackend) -> None:
    from retinue.errors import BlockLimitError, MemoryStoreError

    with pytest.raises(BlockLimitError, match=f"limit of {SHARED_BLOCK_LIMIT}"):
        await store.edit_shared_block("t", "team-notes", lambda _: "x" * (SHARED_BLOCK_LIMIT + 1))
    with pytest.raises(MemoryStoreError, match="cannot name a shared block"):
        await store.edit_shared_block("t", "persona", lambda _: "x")


async def test_75_concurrent_appends_from_75_sessions_are_all_kept(store: MemoryBackend) -> None:
    async def one(i: int) -> None:
        ctx = ToolContext(f"main/w#{i}", Path("."), Path("."), role=f"w{i % 5}", tenant="t",
                          memory=store, shared_memory=(NOTES,))  # fmt: skip
        text, err = await call(ctx, "core_memory_append", block="team-notes", content=f"n{i}")
        assert not err, text

    await asyncio.gather(*(one(i) for i in range(75)))
    (block,) = await store.shared_blocks("t", ["team-notes"])
    assert sorted(block.value.splitlines()) == sorted(f"n{i}" for i in range(75))
    assert block.version == 75


async def test_consolidations_and_tool_edits_racing_on_a_shared_block_keep_every_line(
    store: MemoryBackend,
) -> None:
    def add(fact: str):
        def respond(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> AssistantMessage:
            shown = re.search(r'<team-notes shared="writable"[^>]*>\n(.*?)\n</team-notes>',
                              messages[-1].content, re.S)  # fmt: skip
            old = shown.group(1) if shown and shown.group(1) else ""
            value = f"{old}\n{fact}" if old else fact
            update = {"block": "team-notes", "value": value}
            return call_tool("memorize", {"block_updates": [update]})

        return respond

    async def consolidate(i: int) -> bool:
        model = ScriptedModel(responder=add(f"c{i}"), delay=0.01 * (i % 3))
        return await store.consolidate(tenant="t", role=f"r{i % 3}", session_id=f"s{i}",
                                       messages=SESSION, model=model, shared=[NOTES])  # fmt: skip

    async def tool_edit(i: int) -> None:
        await store.edit_shared_block("t", "team-notes", lambda v: f"{v}\nt{i}" if v else f"t{i}")

    done = await asyncio.gather(*(consolidate(i) for i in range(8)),
                                *(tool_edit(i) for i in range(8)))  # fmt: skip
    assert all(done[:8])
    (block,) = await store.shared_blocks("t", ["team-notes"])
    expected = {f"c{i}" for i in range(8)} | {f"t{i}" for i in range(8)}
    assert set(block.value.splitlines()) == expected


async def test_consolidation_writes_a_writable_shared_block_and_not_a_read_only_one(
    store: MemoryBackend,
) -> None:
    await store.edit_shared_block("t", "house-rules", lambda _: "No deploys on Fridays.")
    rewrite_rules = {"block": "house-rules", "value": "Deploy whenever."}
    notes = {"block": "team-notes", "value": "We use PostgreSQL 17."}
    model = ScriptedModel([
        call_tool("memorize", {"block_updates": [rewrite_rules, notes]}),
        call_tool("memorize", {"block_updates": [notes, {"block": "human", "value": "Ana"}]}),
    ])  # fmt: skip
    result = await store.consolidate_session(
        tenant="t", role="dev", session_id="s1", messages=SESSION, model=model,
        shared=[NOTES, RULES],
    )  # fmt: skip
    assert result.ok, result.error
    assert result.blocks_updated == 2
    sent_back = model.calls[1].messages[-1].content
    assert "block 'house-rules' is shared read-only with this role; leave it out" in sent_back
    request = model.calls[0].messages[-1].content
    assert '<house-rules shared="read-only"' in request and "No deploys on Fridays." in request
    rules, team = await store.shared_blocks("t", ["house-rules", "team-notes"])
    assert (rules.value, team.value) == ("No deploys on Fridays.", "We use PostgreSQL 17.")
    assert {b.name: b.value for b in await store.blocks("t", "dev")}["human"] == "Ana"


async def test_a_role_without_the_block_cannot_consolidate_into_it(store: MemoryBackend) -> None:
    update = {"block": "team-notes", "value": "sneaky"}
    model = ScriptedModel([call_tool("memorize", {"block_updates": [update]})] * 3)
    result = await store.consolidate_session(
        tenant="t", role="dev", session_id="s1", messages=SESSION, model=model
    )
    assert not result.ok and "unknown block 'team-notes'" in result.error
    assert await store.shared_blocks("t") == []


# -- the memory tools -------------------------------------------------------------------


async def call(ctx: ToolContext, name: str, **args: object) -> tuple[str, bool]:
    registry = ToolRegistry(memory_tools())
    result = await registry.execute(ToolCall("c1", name, json.dumps(args)), ctx)
    return result.content, result.is_error


async def test_the_core_tools_write_a_writable_shared_block_and_refuse_a_read_only_one(
    store: MemoryBackend, tmp_path: Path
) -> None:
    ctx = ToolContext("a1", tmp_path, tmp_path, role="dev", tenant="acme", memory=store,
                      shared_memory=(NOTES, RULES))  # fmt: skip
    text, err = await call(ctx, "core_memory_append", block="team-notes", content="uses uv")
    assert not err and text == "Appended; block 'team-notes' now holds 7/4000 characters."
    text, err = await call(ctx, "core_memory_replace", block="team-notes", old="uv", new="pip")
    assert not err
    text, err = await call(ctx, "core_memory_append", block="house-rules", content="anything")
    assert err and "block 'house-rules' is shared with role 'dev' read-only" in text
    assert "write: false" in text
    assert [b.value for b in await store.shared_blocks("acme")] == ["uses pip"]
    assert "uses pip" not in await store.render("acme", "dev")  # not its own block
    child = ctx.child(agent_id="a1/x", role="x")  # a child's role declares its own
    text, err = await call(child, "core_memory_append", block="team-notes", content="x")
    assert err and "unknown core memory block 'team-notes'" in text


# -- retries and transfer ---------------------------------------------------------------


async def test_a_retried_consolidation_writes_the_shared_blocks_its_role_declares(
    store: MemoryBackend,
) -> None:
    from retinue.errors import ModelError

    failing = ScriptedModel([ModelError("down")] * 3)
    result = await store.consolidate_session(
        tenant="t", role="dev", session_id="s1", messages=SESSION, model=failing, shared=[NOTES]
    )
    assert not result.ok
    update = {"block": "team-notes", "value": "We use PostgreSQL 17."}
    model = ScriptedModel([call_tool("memorize", {"block_updates": [update]})])
    report = await store.retry_pending(
        lambda _: model, stale_after=0, shared_for=lambda role: [NOTES] if role == "dev" else []
    )
    assert report.applied == ["s1"], report.failed
    assert '<team-notes shared="writable"' in model.calls[0].messages[-1].content
    assert [b.value for b in await store.shared_blocks("t")] == ["We use PostgreSQL 17."]


async def test_export_and_import_carry_shared_blocks(store: MemoryBackend, tmp_path: Path) -> None:
    from retinue.memory import open_memory
    from retinue.memory.transfer import export_lines, import_lines

    await store.edit_shared_block("acme", "team-notes", lambda _: "Deploys on Fridays.")
    lines = [line async for line in export_lines(store, "acme")]
    target = open_memory(tmp_path / "elsewhere")
    try:
        counts = await import_lines(target, lines, None)
        assert counts.refused == []
        blocks = await target.shared_blocks("acme")
        assert [(b.name, b.value) for b in blocks] == [("team-notes", "Deploys on Fridays.")]
    finally:
        target.close()


# -- roles written in code, behind the real sub-agent manager ----------------------------


async def test_roles_in_code_share_a_block_through_the_manager(
    store: MemoryBackend, tmp_path: Path
) -> None:
    from retinue.subagents import SubAgentManager
    from retinue.subagents.roles import RoleCatalog

    model = ScriptedModel(name="scripted:team")
    writer = Role("writer", "writes notes", "You write.", None, "scripted:team",
                  frozenset({"memory"}), shared_memory=(NOTES,))  # fmt: skip
    reader = Role("reader", "reads notes", "You read.", None, "scripted:team",
                  frozenset({"memory"}), shared_memory=(RULES_ON_NOTES,))  # fmt: skip
    manager = SubAgentManager(RoleCatalog.of(writer, reader), ToolRegistry(),
                              default_model=model, model_for=lambda _: model, memory=store,
                              memory_tools=memory_tools())  # fmt: skip
    ctx = ToolContext("main", tmp_path, tmp_path, tenant="acme", call_chain=("main",),
                      manager=manager, memory=store)  # fmt: skip
    write = {"block": "team-notes", "content": "Staging is at stage.example."}
    model.add(call_tool("core_memory_append", write), "Written.", call_tool("memorize", {}))
    await manager.run_subagent(ctx, "note the staging host", "writer")
    model.add(call_tool("core_memory_append", write), "Read.", call_tool("memorize", {}))
    await manager.run_subagent(ctx, "where is staging?", "reader")
    model.assert_done()
    prompt = model.calls[3].messages[0].content  # the reader's first request
    assert '<team-notes shared="read-only" chars="28/4000">\nStaging is at stage.example.' in prompt
    assert "read-only (its role file says write: false)" in model.calls[4].messages[-1].content
    assert [b.value for b in await store.shared_blocks("acme")] == ["Staging is at stage.example."]


class _PlainMemory:
    """A program's own memory store, written before shared blocks: it keeps none."""

    async def render(self, tenant: str, role: str) -> str:
        return ""

    async def consolidate(self, **_: object) -> bool:
        return True


async def test_a_store_without_shared_blocks_is_a_clear_error_for_a_role_with_them(
    tmp_path: Path,
) -> None:
    from retinue.errors import RetinueError
    from retinue.subagents import SubAgentManager
    from retinue.subagents.roles import RoleCatalog

    model = ScriptedModel(name="scripted:team")
    writer = Role("writer", "writes notes", "You write.", None, "scripted:team",
                  frozenset({"memory"}), shared_memory=(NOTES,))  # fmt: skip
    manager = SubAgentManager(RoleCatalog.of(writer), ToolRegistry(), default_model=model,
                              model_for=lambda _: model, memory=_PlainMemory())  # type: ignore[arg-type]  # fmt: skip
    ctx = ToolContext("main", tmp_path, tmp_path, call_chain=("main",), manager=manager)
    with pytest.raises(RetinueError, match="declares shared memory blocks, but the memory store"):
        await manager.run_subagent(ctx, "note it", "writer")
    assert model.calls == []  # nothing was asked of the model
