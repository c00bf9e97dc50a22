"""The conversation stores keep images and PDFs out of their message rows: one
content-addressed file per distinct content in ``<home>/media`` (SQLite) or one row of
``conversation_media`` (PostgreSQL), capped, removed when no conversation references it."""

from __future__ import annotations

import hashlib
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from retinue.errors import MemoryStoreError
from retinue.memory import MemoryBackend, SQLiteMemory, open_memory
from retinue.messages import (
    AssistantMessage,
    DocumentPart,
    ImagePart,
    Message,
    ToolResultMessage,
    UserMessage,
)
from retinue.store.media import MediaRoom, MediaStore, MediaStoreFull

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40
PDF = b"%PDF-1.7\n1 0 obj << /Type /Page >> endobj\n%%EOF\n"


def history(image: bytes = PNG) -> list[Message]:
    return [
        UserMessage("what is this?", (ImagePart("image/png", image, name="a.png"),)),
        ToolResultMessage("c1", "Read", "r.pdf", parts=(DocumentPart("application/pdf", PDF),)),
        UserMessage("and this?", (ImagePart("image/jpeg", url="https://example.com/x.jpg"),)),
        AssistantMessage("a cat"),
    ]


def media_files(home: Path) -> set[str]:
    return {p.name for p in (home / "media").glob("??/*")}


def rows(home: Path) -> str:
    with sqlite3.connect(home / "memory.db") as db:
        return "\n".join(b for (b,) in db.execute("SELECT body FROM conversation_messages"))


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


async def test_media_lives_in_files_named_by_content_and_loads_back(tmp_path: Path) -> None:
    store = open_memory(tmp_path)
    await store.conversations.save("t", "c", history())
    assert media_files(tmp_path) == {sha(PNG), sha(PDF)}
    assert (tmp_path / "media" / sha(PNG)[:2] / sha(PNG)).read_bytes() == PNG
    modes = [
        p.stat().st_mode & 0o777 for p in (tmp_path / "media", tmp_path / "media" / sha(PNG)[:2])
    ]
    assert modes == [0o700, 0o700]  # the user's alone, as memory.db is
    stored = rows(tmp_path)
    assert sha(PNG) in stored and len(stored) < len(PNG)  # a reference, not the bytes
    assert await store.conversations.load("t", "c") == history()
    store.close()
    reopened = open_memory(tmp_path)  # another process
    assert await reopened.conversations.load("t", "c") == history()
    reopened.close()


async def stored_media(store: MemoryBackend) -> set[str]:
    """The digests the store keeps bytes of (files, or rows of ``conversation_media``)."""
    if isinstance(store, SQLiteMemory):
        return {p.name for p in store.media.root.glob("??/*")}
    async with store.connection() as conn:
        cur = await conn.execute("SELECT sha256 FROM conversation_media")
        return {str(d) for (d,) in await cur.fetchall()}


async def test_deleting_a_conversation_removes_the_media_only_it_used(
    new_store: Callable[..., MemoryBackend],
) -> None:
    store = new_store()
    other = PNG + b"!"
    await store.conversations.save("t", "a", history())
    await store.conversations.save("u", "b", history(other))  # shares the PDF only
    assert await stored_media(store) == {sha(PNG), sha(PDF), sha(other)}
    assert await store.conversations.load("t", "a") == history()
    assert await store.conversations.delete("t", "a")
    assert await stored_media(store) == {sha(other), sha(PDF)}
    assert await store.conversations.load("u", "b") == history(other)
    assert await store.conversations.delete("u", "b")
    assert await stored_media(store) == set()


async def test_prune_sweeps_orphans_of_rewritten_histories(
    new_store: Callable[..., MemoryBackend],
) -> None:
    store = new_store()
    await store.conversations.save("t", "a", history())
    await store.conversations.save("t", "a", [UserMessage("start over")])  # PNG, PDF orphaned
    assert await stored_media(store) == {sha(PNG), sha(PDF)}
    assert await store.conversations.prune(time.time() - 3600) == 0  # nothing old to forget
    assert await stored_media(store) == set()
    assert await store.conversations.load("t", "a") == [UserMessage("start over")]


async def test_a_save_past_the_cap_is_refused_in_one_line_and_nothing_is_lost(
    new_store: Callable[..., MemoryBackend],
) -> None:
    store = new_store(media_max_bytes=len(PNG) + len(PDF) + 10)
    await store.conversations.save("t", "a", history())
    bigger = history(PNG * 2)
    with pytest.raises(MediaStoreFull, match="media store full") as info:
        await store.conversations.save("t", "b", bigger)
    assert "\n" not in str(info.value) and "media_max_bytes" in str(info.value)
    assert await store.conversations.load("t", "b") is None  # the refused save wrote nothing
    assert await store.conversations.load("t", "a") == history()
    await store.conversations.save("t", "c", history())  # the same content needs no room
    assert await store.conversations.load("t", "c") == history()
    assert isinstance(store.conversations, MediaRoom)  # asked before a turn runs
    await store.conversations.check_media_room(10)
    with pytest.raises(MediaStoreFull, match="11 more do not fit"):
        await store.conversations.check_media_room(11)


async def test_a_missing_or_altered_file_is_a_clear_error(tmp_path: Path) -> None:
    store = open_memory(tmp_path)
    await store.conversations.save("t", "a", history())
    (tmp_path / "media" / sha(PDF)[:2] / sha(PDF)).write_bytes(PDF + b"x")
    with pytest.raises(MemoryStoreError, match=f"stored media {sha(PDF)[:12]} is damaged"):
        await store.conversations.load("t", "a")
    (tmp_path / "media" / sha(PDF)[:2] / sha(PDF)).unlink()
    with pytest.raises(MemoryStoreError, match="is missing"):
        await store.conversations.load("t", "a")
    store.close()


def test_a_reference_is_only_ever_a_digest(tmp_path: Path) -> None:
    media = MediaStore(tmp_path)
    with pytest.raises(MemoryStoreError, match="bad media reference"):
        media.get("../../etc/passwd")
    digest = media.put(PNG)
    assert media.put(PNG) == digest and media.used() == len(PNG)
    assert media.get(digest) == PNG
    leftover = tmp_path / digest[:2] / ".part-x1y2"  # a write cut short
    leftover.write_bytes(b"half")
    assert media.sweep({digest}) == 1 and not leftover.exists() and media.get(digest) == PNG
