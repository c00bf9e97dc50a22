"""Core memory blocks: limits, edits, rendering into the prompt."""

from collections.abc import Callable

import pytest

from memory.backends import close
from retinue.errors import BlockLimitError, MemoryStoreError
from retinue.memory import DEFAULT_BLOCK_LIMITS, MemoryBackend


async def test_render_lists_default_blocks_and_archival_count(store: MemoryBackend) -> None:
    await store.append_block("t", "coder", "human", "Name: Ann")
    await store.insert_passage("t", "coder", "Ann prefers tabs")
    text = await store.render("t", "coder")
    for name in DEFAULT_BLOCK_LIMITS:
        assert f"<{name} " in text
    assert "Name: Ann" in text
    assert "Archival memory: 1 passage " in text


async def test_append_joins_lines(store: MemoryBackend) -> None:
    await store.append_block("t", "r", "human", "one")
    b = await store.append_block("t", "r", "human", "two")
    assert b.value == "one\ntwo"


async def test_write_at_limit_passes_and_one_over_is_refused(store: MemoryBackend) -> None:
    limit = DEFAULT_BLOCK_LIMITS["persona"]
    await store.set_block("t", "r", "persona", "x" * limit)
    with pytest.raises(BlockLimitError, match="limit of 2000"):
        await store.append_block("t", "r", "persona", "y")
    with pytest.raises(BlockLimitError):
        await store.set_block("t", "r", "persona", "z" * (limit + 1))
    (persona,) = [b for b in await store.blocks("t", "r") if b.name == "persona"]
    assert persona.value == "x" * limit


async def test_custom_limits(new_store: Callable[..., MemoryBackend]) -> None:
    s = new_store(block_limits={"notes": 10})
    await s.set_block("t", "r", "notes", "0123456789")
    with pytest.raises(BlockLimitError):
        await s.replace_in_block("t", "r", "notes", "9", "99")
    assert [b.name for b in await s.blocks("t", "r")] == ["notes"]


async def test_replace_needs_existing_text(store: MemoryBackend) -> None:
    await store.set_block("t", "r", "human", "likes tea")
    b = await store.replace_in_block("t", "r", "human", "tea", "coffee")
    assert b.value == "likes coffee"
    with pytest.raises(MemoryStoreError, match="not found"):
        await store.replace_in_block("t", "r", "human", "juice", "water")


async def test_unknown_block_is_refused(store: MemoryBackend) -> None:
    with pytest.raises(MemoryStoreError, match="unknown core memory block 'diary'"):
        await store.append_block("t", "r", "diary", "x")


async def test_reopened_store_keeps_blocks(new_store: Callable[..., MemoryBackend]) -> None:
    s = new_store()
    await s.set_block("t", "r", "human", "kept")
    await close(s)
    assert "kept" in await new_store().render("t", "r")
