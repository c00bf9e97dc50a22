"""Images and PDFs of stored conversations, kept out of the message rows.

A message row of the SQLite conversation store holds, for each image or PDF of the message,
a *reference* (``{"type", "media_type", "sha256", "size", "name"}``) instead of the bytes;
the bytes live once, however many conversations send them, in the data directory as
``media/<first two hex digits>/<sha256>`` (content-addressed: the name is the SHA-256 of
the content, checked again when read). :func:`stash` turns a row's parts into references
(storing their bytes) and :func:`restore` turns them back, so loading a conversation gives
the very bytes that were saved. The store is capped (``media_max_bytes`` in
``config.toml``): a save that would grow it past the cap is refused with a one-line
:class:`MediaStoreFull`. Files go when nothing references them any more: the conversation
store removes a deleted conversation's files that no other row names (:meth:`MediaStore.
discard`), and :meth:`MediaStore.sweep` removes every orphan (after pruning). Every call
runs inside the conversation store's write transaction, so a file is never removed while
another save references it. PostgreSQL serves several workers that share no data
directory: there the bytes go to the table ``conversation_media`` instead, by the same
references and with the same cap (:mod:`retinue.store.pg_media`).
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import tempfile
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from retinue.errors import MemoryStoreError
from retinue.messages import Message, ToolResultMessage, UserMessage, to_dict

__all__ = [
    "DEFAULT_MEDIA_MAX_BYTES",
    "MediaRoom",
    "MediaStore",
    "MediaStoreFull",
    "references",
    "restore",
    "stash",
    "too_full",
]

DEFAULT_MEDIA_MAX_BYTES = 2 * 2**30
"""Bytes of images and PDFs the conversation store may keep by default (2 GiB)."""

_DIGEST = re.compile(r"[0-9a-f]{64}")
_REFERENCE = re.compile(r'"sha256":\s*"([0-9a-f]{64})"')


class MediaStoreFull(MemoryStoreError):
    """Storing a part would grow the media store past its cap."""


@runtime_checkable
class MediaRoom(Protocol):
    """A conversation store that keeps media under a cap, and says before a turn whether a
    message's parts will fit."""

    async def check_media_room(self, size: int) -> None:
        """:class:`MediaStoreFull` (one line) unless ``size`` more bytes of media fit."""
        ...


def too_full(used: int, cap: int, size: int) -> MediaStoreFull:
    """The one-line refusal of ``size`` more bytes in a store holding ``used`` of ``cap``."""
    return MediaStoreFull(
        f"media store full: {used:,} of {cap:,} bytes used, {size:,} more do not fit "
        "(media_max_bytes in config.toml)"
    )


class MediaStore:
    """Content-addressed files under ``root``, at most ``max_bytes`` in all."""

    def __init__(self, root: Path, max_bytes: int = DEFAULT_MEDIA_MAX_BYTES) -> None:
        self.root = root
        self.max_bytes = max_bytes
        self._used: int | None = None  # bytes stored, counted on first need
        self._lock = threading.Lock()

    def path(self, digest: str) -> Path:
        if not _DIGEST.fullmatch(digest):
            raise MemoryStoreError(f"bad media reference {digest[:70]!r}")
        return self.root / digest[:2] / digest

    def used(self) -> int:
        """Bytes stored now."""
        with self._lock:
            if self._used is None:
                self._used = sum(p.stat().st_size for p in self._files())
            return self._used

    def room(self, size: int) -> bool:
        """Whether ``size`` more bytes fit under the cap."""
        return self.used() + size <= self.max_bytes

    def check_room(self, size: int) -> None:
        """:class:`MediaStoreFull` (one line) unless ``size`` more bytes fit under the cap."""
        if not self.room(size):
            raise too_full(self.used(), self.max_bytes, size)

    def put(self, data: bytes) -> str:
        """Store ``data`` (once: a file of the same content is kept); its SHA-256."""
        digest = hashlib.sha256(data).hexdigest()
        target = self.path(digest)
        if target.is_file():
            return digest
        self.check_room(len(data))
        try:
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)  # the user's alone
            target.parent.mkdir(mode=0o700, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".part-")
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(tmp, target)
        except OSError as exc:
            raise MemoryStoreError(f"cannot store media {digest[:12]}: {exc}") from None
        with self._lock:
            if self._used is not None:
                self._used += len(data)
        return digest

    def get(self, digest: str) -> bytes:
        """The bytes stored as ``digest``; ``MemoryStoreError`` when missing or damaged."""
        try:
            data = self.path(digest).read_bytes()
        except OSError:
            raise MemoryStoreError(f"stored media {digest[:12]} is missing") from None
        if hashlib.sha256(data).hexdigest() != digest:
            raise MemoryStoreError(f"stored media {digest[:12]} is damaged")
        return data

    def discard(self, digests: Iterable[str], used: Callable[[str], bool]) -> int:
        """Remove the files of ``digests`` that ``used`` says nothing references; how many."""
        return sum(self._remove(self.path(d)) for d in set(digests) if not used(d))

    def sweep(self, referenced: set[str]) -> int:
        """Remove every file not in ``referenced`` (and leftovers of a failed write)."""
        return sum(self._remove(p) for p in self._files() if p.name not in referenced)

    def _files(self) -> list[Path]:
        if not self.root.is_dir():
            return []
        return [p for p in self.root.glob("??/*") if p.is_file() and not p.is_symlink()]

    def _remove(self, path: Path) -> bool:
        try:
            size = path.stat().st_size
            path.unlink()
        except OSError:
            return False
        with self._lock:
            if self._used is not None:
                self._used = max(0, self._used - size)
        return True


def stash(message: Message, put: Callable[[bytes], str]) -> dict[str, Any]:
    """``message``'s :func:`~retinue.messages.to_dict` with each part's bytes stored by
    ``put`` (:meth:`MediaStore.put`, or a database's) and replaced by a reference."""
    row = to_dict(message)
    if not isinstance(message, UserMessage | ToolResultMessage) or not message.parts:
        return row
    out: list[dict[str, Any]] = []
    for part, shown in zip(message.parts, row["parts"], strict=True):
        if part.data:  # (by URL: nothing to keep)
            kept = {k: v for k, v in shown.items() if k != "data"}
            shown = {**kept, "sha256": put(part.data), "size": len(part.data)}
        out.append(shown)
    return {**row, "parts": out}


def restore(row: dict[str, Any], get: Callable[[str], bytes]) -> dict[str, Any]:
    """The inverse of :func:`stash` on a stored row: references back to base64 ``data``,
    the bytes given by ``get`` (a row without any comes back as it is)."""
    parts = row.get("parts")
    if not isinstance(parts, list) or not any(isinstance(p, dict) and "sha256" in p for p in parts):
        return row
    out = [_restored(p, get) if isinstance(p, dict) and "sha256" in p else p for p in parts]
    return {**row, "parts": out}


def _restored(part: dict[str, Any], get: Callable[[str], bytes]) -> dict[str, Any]:
    data = base64.b64encode(get(str(part["sha256"]))).decode("ascii")
    return {**{k: v for k, v in part.items() if k not in ("sha256", "size")}, "data": data}


def references(body: str) -> set[str]:
    """The digests a stored row (its JSON text) references."""
    return set(_REFERENCE.findall(body))
