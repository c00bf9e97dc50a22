"""The ConversationStore protocol, through a fixture a backend parametrisation can replace."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from retinue.memory import MemoryBackend
from retinue.messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from retinue.store.conversations import TITLE_CHARS, ConversationStore


@pytest.fixture
def conv_store(new_store: Callable[..., MemoryBackend]) -> ConversationStore:
    """The conversations of a fresh store of each backend (SQLite, PostgreSQL)."""
    return new_store().conversations


def chat(*texts: str) -> list[Message]:
    out: list[Message] = [SystemMessage("You are Retinue.")]
    for text in texts:
        out += [UserMessage(text), AssistantMessage(f"re: {text}")]
    return out


def test_the_store_implements_the_protocol(conv_store: ConversationStore) -> None:
    assert isinstance(conv_store, ConversationStore)


async def test_a_saved_history_loads_back_message_for_message(
    conv_store: ConversationStore,
) -> None:
    history: list[Message] = [
        SystemMessage("sys"),
        UserMessage("read a.txt ✓"),
        AssistantMessage("", (ToolCall("c1", "Read", '{"file_path": "a.txt"}'),)),
        ToolResultMessage("c1", "Read", "no such file", is_error=True),
        AssistantMessage("It is missing."),
    ]
    await conv_store.save("t", "c", history)
    assert await conv_store.load("t", "c") == history
    assert await conv_store.load("t", "other") is None
    assert await conv_store.load("other-tenant", "c") is None


async def test_a_lone_surrogate_a_model_sent_is_stored_replaced_not_refused(
    conv_store: ConversationStore,
) -> None:
    """UTF-8 cannot hold a lone surrogate (JSON from a model can carry one): the history is
    saved with U+FFFD in its place, title included, instead of the save failing."""
    history: list[Message] = [
        UserMessage("odd \ud800 title"),
        AssistantMessage("reply \udfff", (ToolCall("c1", "Read", '{"file_path": "\ud83d"}'),)),
        ToolResultMessage("c1", "Read", "ok"),
    ]
    await conv_store.save("t", "s", history)
    loaded = await conv_store.load("t", "s")
    assert loaded is not None and len(loaded) == 3
    assert loaded[0] == UserMessage("odd \ufffd title")
    assert isinstance(loaded[1], AssistantMessage) and loaded[1].content == "reply \ufffd"
    [summary] = [s for s in await conv_store.summaries("t") if s.id == "s"]
    assert summary.title == "odd \ufffd title"


async def test_saving_with_keep_writes_the_tail_and_replaces_what_followed(
    conv_store: ConversationStore,
) -> None:
    await conv_store.save("t", "c", chat("one", "two"))
    longer = chat("one", "two", "three")
    await conv_store.save("t", "c", longer, keep=5)
    assert await conv_store.load("t", "c") == longer
    # a rewritten history (compression replaced the start): keep=0 rewrites it all
    summary: list[Message] = [SystemMessage("sys"), UserMessage("summary"), *longer[-2:]]
    await conv_store.save("t", "c", summary, keep=0)
    assert await conv_store.load("t", "c") == summary
    # a keep beyond what is stored is what is stored
    await conv_store.save("t", "c", chat("x"), keep=99)
    loaded = await conv_store.load("t", "c")
    assert loaded is not None and len(loaded) == 3


async def test_summaries_are_per_tenant_newest_first_with_a_title(
    conv_store: ConversationStore,
) -> None:
    await conv_store.save("t", "old", chat("first chat"))
    await conv_store.save("t", "new", chat("a\nmultiline   question " + "x" * 200))
    await conv_store.save("u", "theirs", chat("hidden"))
    listed = await conv_store.summaries("t")
    assert [s.id for s in listed] == ["new", "old"]
    assert listed[1].title == "first chat" and listed[1].messages == 3
    assert "\n" not in listed[0].title and len(listed[0].title) == TITLE_CHARS
    assert listed[0].created_at <= listed[0].updated_at <= time.time()
    assert [s.id for s in await conv_store.summaries("t", limit=1)] == ["new"]
    await conv_store.save("t", "old", chat("first chat", "again"), keep=3)
    assert [s.id for s in await conv_store.summaries("t")] == ["old", "new"]


async def test_delete_forgets_the_history(conv_store: ConversationStore) -> None:
    await conv_store.save("t", "c", chat("one"))
    await conv_store.save("u", "c", chat("theirs"))
    assert await conv_store.delete("t", "c") is True
    assert await conv_store.delete("t", "c") is False
    assert await conv_store.load("t", "c") is None
    assert await conv_store.load("u", "c") == chat("theirs")
    await conv_store.save("t", "c", chat("fresh"))  # the id can be used again, from scratch
    assert await conv_store.load("t", "c") == chat("fresh")


async def test_prune_forgets_conversations_not_saved_since(
    conv_store: ConversationStore,
) -> None:
    await conv_store.save("t", "stale", chat("one"))
    await conv_store.save("u", "stale", chat("one"))
    assert await conv_store.prune(time.time() - 3600) == 0
    cutoff = time.time() + 0.001
    while time.time() <= cutoff:  # the next save is after the cutoff
        await asyncio.sleep(0.001)
    await conv_store.save("t", "fresh", chat("two"))
    assert await conv_store.prune(cutoff) == 2
    assert [s.id for s in await conv_store.summaries("t")] == ["fresh"]
    assert await conv_store.summaries("u") == []
    assert await conv_store.load("t", "stale") is None
    assert await conv_store.prune(cutoff) == 0


async def test_pending_approvals_are_saved_with_the_history_and_cleared_by_the_next_save(
    conv_store: ConversationStore,
) -> None:
    waiting = {"id": "approval-7", "tool": "Write", "depth": 0, "arguments": '{"a": "✓"}'}
    await conv_store.save("t", "c", chat("one"), approvals=[waiting])
    assert await conv_store.approvals("t", "c") == [waiting]
    assert await conv_store.approvals("other-tenant", "c") == []
    assert await conv_store.approvals("t", "none") == []
    await conv_store.save("t", "c", chat("one", "two"), keep=3)  # no approvals: none kept
    assert await conv_store.approvals("t", "c") == []
    await conv_store.save("t", "c", chat("one", "two"), keep=5, approvals=[waiting, waiting])
    assert len(await conv_store.approvals("t", "c")) == 2
    assert await conv_store.delete("t", "c")
    assert await conv_store.approvals("t", "c") == []
