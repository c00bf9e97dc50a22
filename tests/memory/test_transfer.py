"""``retinue memory export`` / ``import``: SQLite -> PostgreSQL -> SQLite gives back the same
memory, line for line; importing twice adds nothing; bad input is one line naming its line."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memory.backends import empty_database
from retinue.cli.memory import memory_app
from retinue.errors import MemoryStoreError
from retinue.memory import open_memory
from retinue.memory.base import MAX_PASSAGE_CHARS
from retinue.memory.sqlite import NewPassage
from retinue.messages import AssistantMessage, ToolCall, ToolResultMessage, UserMessage

runner = CliRunner()


async def fill(home: Path) -> None:
    store = open_memory(home)
    await store.set_block("acme", "coder", "human", "Prefers Rust\nWorks at night")
    await store.set_block("acme", "coder", "persona", "Terse ✓")
    await store.set_block("zeta", "main", "human", "Other tenant")
    store.insert_passages_sync(
        "acme", "coder",
        [NewPassage("CI runs on self-hosted runners", "agent", [0.5, -1.25, 3.0]),
         NewPassage("The deploy key rotates monthly", "session:s1")],
    )  # fmt: skip
    await store.insert_passage("zeta", "main", "zeta's own fact")
    store.apply_consolidation(
        run_id="run1", tenant="acme", role="coder", session_id="s1",
        block_updates={}, passages=[],
    )  # fmt: skip
    await store.conversations.save("acme", "c1", [
        UserMessage("read a.txt"),
        AssistantMessage("", (ToolCall("t1", "Read", '{"file_path": "a.txt"}'),)),
        ToolResultMessage("t1", "Read", "hello", is_error=False),
        AssistantMessage("It says hello."),
    ])  # fmt: skip
    store.close()


def invoke(args: list[str], **env: str) -> str:
    result = runner.invoke(memory_app, args, env=env)
    assert result.exit_code == 0, result.output
    return result.stdout


async def test_sqlite_to_postgres_and_back_keeps_everything(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    await empty_database(pg_url)
    src, back = tmp_path / "src", tmp_path / "back"
    await fill(src)
    monkeypatch.setenv("RETINUE_DATABASE_URL", pg_url)

    def cli(args: list[str], home: Path) -> str:
        return invoke(args, RETINUE_HOME=str(home))

    exported = await asyncio.to_thread(cli, ["export", "--sqlite"], src)
    (tmp_path / "m.jsonl").write_text(exported)
    assert len(exported.splitlines()) == 1 + 3 + 3 + 1 + 1  # header, blocks, passages...
    out = await asyncio.to_thread(cli, ["import", str(tmp_path / "m.jsonl")], src)
    assert "3 blocks" in out and "3 passages" in out and "1 conversations" in out
    from_pg = await asyncio.to_thread(cli, ["export"], src)
    assert from_pg == exported
    again = await asyncio.to_thread(cli, ["import", str(tmp_path / "m.jsonl")], src)
    assert "skipped 4" in again  # passages and the consolidation were there already
    assert await asyncio.to_thread(cli, ["export"], src) == from_pg

    (tmp_path / "pg.jsonl").write_text(from_pg)
    await asyncio.to_thread(cli, ["import", "--sqlite", str(tmp_path / "pg.jsonl")], back)
    assert await asyncio.to_thread(cli, ["export", "--sqlite"], back) == exported
    only = await asyncio.to_thread(cli, ["export", "--sqlite", "--tenant", "zeta"], back)
    assert len(only.splitlines()) == 3 and '"acme"' not in only
    recalled = await asyncio.to_thread(cli, ["search", "coder", "runners", "--tenant", "acme"], src)
    assert "CI runs on self-hosted runners" in recalled  # found through the new tsvector


def test_bad_input_is_one_line_naming_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"kind": "header", "format": "retinue-memory/1"}\n{"kind": "blok"}\n')
    result = runner.invoke(memory_app, ["import", str(bad)], env={"RETINUE_HOME": str(tmp_path)})
    assert result.exit_code == 1
    assert "line 2" in result.output and "Traceback" not in result.output
    headless = tmp_path / "headless.jsonl"
    headless.write_text('{"kind": "block", "tenant": "t", "role": "r", "name": "human", '
                        '"value": "x"}\n')  # fmt: skip
    result = runner.invoke(
        memory_app, ["import", str(headless)], env={"RETINUE_HOME": str(tmp_path)}
    )
    assert result.exit_code == 1 and "not a Retinue memory export" in result.output


def test_an_oversized_passage_is_refused_by_line_and_the_rest_is_imported(tmp_path: Path) -> None:
    huge = "The build log says " + "x" * (15 * 1024 * 1024)
    lines = [
        {"kind": "header", "format": "retinue-memory/1"},
        {"kind": "block", "tenant": "acme", "role": "coder", "name": "human", "value": "Ann"},
        {"kind": "passage", "tenant": "acme", "role": "coder", "content": huge,
         "source": "agent", "created_at": 1.0},
        {"kind": "passage", "tenant": "acme", "role": "coder", "content": "   ",
         "source": "agent", "created_at": 1.0},
        {"kind": "passage", "tenant": "acme", "role": "coder",
         "content": "CI runs on self-hosted runners", "source": "agent", "created_at": 2.0},
        {"kind": "conversation", "tenant": "acme", "id": "c1",
         "messages": [{"role": "user", "content": "hi"}]},
    ]  # fmt: skip
    source = tmp_path / "m.jsonl"
    source.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    home = tmp_path / "home"
    result = runner.invoke(memory_app, ["import", str(source)], env={"RETINUE_HOME": str(home)})

    assert result.exit_code == 1  # something was left out: a script notices
    assert "Traceback" not in result.output
    assert "1 blocks" in result.stdout and "1 passages" in result.stdout
    assert "1 conversations" in result.stdout and "refused 2" in result.stdout
    refusals = [line for line in result.stderr.splitlines() if line.startswith("refused:")]
    assert len(refusals) == 2
    assert "line 3" in refusals[0] and "'coder'" in refusals[0] and "over the limit" in refusals[0]
    assert "line 4" in refusals[1] and "needs some text" in refusals[1]

    store = open_memory(home)
    try:
        assert asyncio.run(store.passage_count("acme", "coder")) == 1
        hits = asyncio.run(store.search("acme", "coder", "build log runners", 10))
        assert [h.content for h in hits] == ["CI runs on self-hosted runners"]
    finally:
        store.close()


async def test_the_stores_and_the_import_share_one_passage_bound(tmp_path: Path) -> None:
    store = open_memory(tmp_path)
    try:
        longest = "y" * MAX_PASSAGE_CHARS
        assert await store.insert_passage("t", "r", longest) is not None
        with pytest.raises(MemoryStoreError, match="over the limit"):
            await store.insert_passage("t", "r", longest + "y")  # what archival_memory_insert calls
        assert await store.passage_count("t", "r") == 1
    finally:
        store.close()
