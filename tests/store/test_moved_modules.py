"""The modules issue 42 moved keep their old paths for one release, as deprecated aliases:
each old module answers every public name of its new home with the very same object, and
says in its docstring that it is an alias. (The sweep that switches the imports leaves this
file alone.)"""

from __future__ import annotations

import importlib

import pytest

MOVED = {
    "retinue.memory.conversations": "retinue.store.conversations",
    "retinue.memory.journal": "retinue.store.journal",
    "retinue.memory.media": "retinue.store.media",
    "retinue.memory.tasks": "retinue.store.tasks",
    "retinue.memory.transcripts": "retinue.store.transcripts",
    "retinue.memory.sqlite_conversations": "retinue.store.sqlite_conversations",
    "retinue.memory.sqlite_journal": "retinue.store.sqlite_journal",
    "retinue.memory.sqlite_transcripts": "retinue.store.sqlite_transcripts",
    "retinue.memory.pg_conversations": "retinue.store.pg_conversations",
    "retinue.memory.pg_journal": "retinue.store.pg_journal",
    "retinue.memory.pg_media": "retinue.store.pg_media",
    "retinue.memory.pg_transcripts": "retinue.store.pg_transcripts",
    "retinue.memory.schema": "retinue.store.sqlite_schema",
    "retinue.memory._pg_schema": "retinue.store.pg_schema",
    "retinue.server.mcp_serve": "retinue.mcp.server.serve",
    "retinue.server.mcp_http": "retinue.mcp.server.http",
    "retinue.server.mcp_tasks": "retinue.mcp.server.tasks",
    "retinue.server.mcp_tasks_2025": "retinue.mcp.server.tasks_2025",
    "retinue.a2a.client": "retinue.llm.a2a",
}

MOVED_APART = {
    ("retinue.memory.pg_conversations", "ConversationLeases"): "retinue.store.leases",
    ("retinue.memory.pg_conversations", "LeaseHolder"): "retinue.store.leases",
    ("retinue.memory.base", "TaskStore"): "retinue.store.tasks",
    ("retinue.memory.base", "KeepsTasks"): "retinue.store.tasks",
    ("retinue.memory.base", "task_store"): "retinue.store.tasks",
    ("retinue.memory.text", "scrub"): "retinue.store.text",
    ("retinue.memory.text", "storable"): "retinue.store.text",
    ("retinue.memory.text", "pg_text"): "retinue.store.text",
    ("retinue.memory.postgres", "describe_url"): "retinue.store.postgres",
    ("retinue.memory.postgres", "pg_text"): "retinue.store.text",
    ("retinue.memory", "SessionJournal"): "retinue.store.journal",
    ("retinue.memory", "SessionRecord"): "retinue.store.journal",
}


def _needs_sdk(module: str) -> None:
    if module.startswith("retinue.mcp.server"):
        pytest.importorskip("mcp", reason="the MCP server needs the mcp package")


@pytest.mark.parametrize(("old", "new"), sorted(MOVED.items()))
def test_an_old_module_is_an_alias_of_its_new_home(old: str, new: str) -> None:
    _needs_sdk(new)
    before, after = importlib.import_module(old), importlib.import_module(new)
    assert "deprecated alias" in (before.__doc__ or "").lower()
    assert after.__all__, f"{new} names its public names"
    missing = [n for n in after.__all__ if getattr(before, n, None) is not getattr(after, n)]
    assert missing == []
    assert set(before.__all__) >= set(after.__all__)


@pytest.mark.parametrize(("where", "new"), sorted(MOVED_APART.items()))
def test_a_name_that_moved_apart_is_the_same_object_at_both_homes(
    where: tuple[str, str], new: str
) -> None:
    old, name = where
    assert getattr(importlib.import_module(old), name) is getattr(
        importlib.import_module(new), name
    )


def test_the_new_homes_do_not_import_the_aliases() -> None:
    """Nothing under store/, mcp/server/ or llm/a2a.py goes back through an old path."""
    from pathlib import Path

    import retinue

    root = Path(retinue.__file__).parent
    homes = [*root.joinpath("store").rglob("*.py"), *root.joinpath("mcp", "server").rglob("*.py")]
    homes.append(root / "llm" / "a2a.py")
    offenders = [
        f"{path.relative_to(root)}: {old}"
        for path in homes
        for old in MOVED
        if f"{old} import" in path.read_text(encoding="utf-8")
    ]
    assert offenders == []
