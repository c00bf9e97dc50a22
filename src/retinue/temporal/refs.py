"""History and large messages by reference, so Temporal's payloads stay small.

Two kinds of *stub* stand in a workflow's history (a message dict with a ``"ref"`` key):

- **One message kept by reference.** A tool result (or any message) over the step's
  ``inline_bytes`` is written to the tenant's blob store (:mod:`retinue.store.blobs`) by the
  activity that produced it; the workflow holds its stub: the same role and call id, the
  first :data:`HEAD_CHARS` characters of its content and a note that says how much more
  there is (``{"ref": {"sha256", "size"}}``). Read by :func:`~retinue.messages.from_dict`,
  a stub is an ordinary, shorter message: a front end that does not resolve it shows the
  note.
- **A run of messages: the history a model call was sent.** The model activity stores what
  it was sent as *chunks* (JSON lists of messages, large ones as their stubs) and returns a
  system-message stub naming them (``{"ref": {"chunks": [...], "messages": n}}``); the
  workflow's next model call sends that stub plus the messages since, so each call adds
  only what is new to the workflow's history (it grows linearly with the turns). Each
  call adds one chunk; past :data:`MAX_CHUNKS` they are merged into one.

The activities that need the content (the model call, a consolidation) resolve the stubs
(:meth:`Refs.whole`); so does a front end that shows history (:func:`resolve_history`). A
blob is read only under the tenant that wrote it: a stub of another tenant's resolves to
nothing (:class:`~retinue.store.blobs.BlobMissing`). Bytes read are kept in a small cache
(:class:`BlobCache`), an hour at most: a blob never changes under its digest, and reading it
from the store again tells the store it is still in use (the sweep removes blobs unused past
``blob_retention_days``: :mod:`retinue.store.blobs`).

Content the store no longer keeps (swept, or never this tenant's) does not fail the model
call: a message's stub is read as its head and a note that says the rest is no longer kept,
and a stored history as one user message that says how many earlier messages are gone
(:data:`GONE`); the next stored history holds that note in its place, so the run is not
looked for again (a message's stub stays, read as its note each time). A stub that is not
well formed (no digest, too many chunks) is still refused.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from retinue.errors import MemoryStoreError
from retinue.store.blobs import MAX_BLOB_BYTES, TOUCH_EVERY, BlobMissing, BlobStore

__all__ = [
    "GONE",
    "HEAD_CHARS",
    "MAX_CHUNKS",
    "BlobCache",
    "Expanded",
    "Refs",
    "is_stub",
    "resolve_history",
]

Json = dict[str, Any]

HEAD_CHARS = 2_000  # of a message kept by reference, in the workflow's history
MAX_CHUNKS = 16  # a stored history's chunks, before they are merged into one
MAX_CACHE_BYTES = 64 * 2**20
GONE = "content no longer kept"  # (the note's words where the store has swept content)


def is_stub(message: Json) -> bool:
    return isinstance(message.get("ref"), dict)


def _is_run(message: Json) -> bool:
    ref = message.get("ref")
    return isinstance(ref, dict) and "chunks" in ref


@dataclass(slots=True)
class BlobCache:
    """Blobs read lately, by ``(tenant, digest)``, at most ``max_bytes`` in all, each for
    ``max_age`` seconds (then read from the store again: a read keeps a blob from the
    sweep, so a blob a worker keeps using is read from the store now and then)."""

    max_bytes: int = MAX_CACHE_BYTES
    max_age: float = TOUCH_EVERY
    _held: OrderedDict[tuple[str, str], tuple[bytes, float]] = field(default_factory=OrderedDict)
    _size: int = 0

    def get(self, key: tuple[str, str]) -> bytes | None:
        found = self._held.get(key)
        if found is None:
            return None
        if time.monotonic() - found[1] > self.max_age:
            self._drop(key)
            return None
        self._held.move_to_end(key)
        return found[0]

    def put(self, key: tuple[str, str], data: bytes) -> None:
        if len(data) > self.max_bytes // 4 or key in self._held:
            return
        self._held[key] = (data, time.monotonic())
        self._size += len(data)
        while self._size > self.max_bytes:
            self._drop(next(iter(self._held)))

    def _drop(self, key: tuple[str, str]) -> None:
        data, _ = self._held.pop(key)
        self._size -= len(data)


@dataclass(slots=True)
class Expanded:
    """A step's messages with its history stub opened: each message in its workflow form
    (large ones as their stubs), and the chunks of the stored run the first ``covered``
    of them came from."""

    forms: list[Json]
    chunks: list[str]
    covered: int


class Refs:
    """One tenant's messages by reference, in an activity: write, open, resolve. Content
    the store does not keep is read as a note that says so (:data:`GONE`); ``strict``: as
    :class:`~retinue.store.blobs.BlobMissing` (a front end keeps the stub then)."""

    def __init__(
        self, blobs: BlobStore, tenant: str, cache: BlobCache | None = None, *, strict: bool = False
    ) -> None:
        self.blobs = blobs
        self.tenant = tenant
        self.cache = cache if cache is not None else BlobCache()
        self.strict = strict

    async def keep(self, message: Json, inline_bytes: int) -> Json:
        """``message`` as it goes into the workflow: itself if its JSON is at most
        ``inline_bytes``, else its stub (the message written to the store)."""
        data = _dumps([message])
        if len(data) <= inline_bytes or inline_bytes <= 0:
            return message
        if len(data) > MAX_BLOB_BYTES:  # (a tool's output past any use: cut, and said so)
            message = _cut(message, len(data))
            data = _dumps([message])
        digest = await self.blobs.put(self.tenant, data)
        return _stub(message, digest, len(data))

    async def store_run(self, expanded: Expanded) -> Json:
        """Store the messages of ``expanded`` (the chunks it came from, plus one for those
        after them, or one chunk for all past :data:`MAX_CHUNKS`); their stub."""
        forms, chunks = expanded.forms, list(expanded.chunks)
        rest = forms[expanded.covered :]
        if len(chunks) >= MAX_CHUNKS:
            chunks, rest = [], forms
        if rest or not chunks:
            chunks.append(await self.blobs.put(self.tenant, _dumps(rest)))
        return run_stub(chunks, len(forms))

    async def expand(self, messages: Sequence[Json]) -> Expanded:
        """Open the history stubs of ``messages`` (a model call's first one), keeping the
        stubs of single messages."""
        forms: list[Json] = []
        chunks: list[str] = []
        covered = 0
        for index, message in enumerate(messages):
            if not _is_run(message):
                forms.append(message)
                continue
            names = _chunk_names(message)
            opened = await self._run_of(names)
            forms.extend(opened if opened is not None else [_gone_run(message)])
            if index == 0 and opened is not None:
                chunks, covered = names, len(forms)
        return Expanded(forms, chunks, covered)

    async def _run_of(self, names: list[str]) -> list[Json] | None:
        """The messages of a stored run's chunks, in order (None: one is no longer kept)."""
        out: list[Json] = []
        for digest in names:
            data = await self._read(digest)
            if data is None:
                return None
            out.extend(_messages_of(data))
        return out

    async def whole(self, message: Json) -> Json:
        """A message in full: a single message's stub read back, any other as it is."""
        ref = message.get("ref")
        if not isinstance(ref, dict) or _is_run(message):
            return message
        digest = ref.get("sha256")
        if not isinstance(digest, str):
            raise BlobMissing("a content reference without its digest")
        data = await self._read(digest)
        if data is None:
            return _gone_message(message)
        [stored] = _messages_of(data, one=True)
        return stored

    async def resolve(self, messages: Sequence[Json]) -> list[Json]:
        """Every message of ``messages`` in full (history stubs opened, stubs read)."""
        expanded = await self.expand(messages)
        return [await self.whole(m) for m in expanded.forms]

    async def _read(self, digest: str) -> bytes | None:
        """The blob's bytes (None: the store does not keep it, or not for this tenant)."""
        key = (self.tenant, digest)
        data = self.cache.get(key)
        if data is None:
            try:
                data = await self.blobs.get(self.tenant, digest)
            except BlobMissing:
                if self.strict:
                    raise
                return None
            self.cache.put(key, data)
        return data


async def resolve_history(
    messages: Sequence[Json], blobs: BlobStore | None, tenant: str
) -> list[Json]:
    """What a front end shows of a workflow's history (its ``history`` or ``history_since``
    query): every message in full, read from ``blobs`` (the store the workers share) under
    ``tenant``. Without a store, or where a blob cannot be read, the stub stays: its content
    is the message's head and a note that says the rest is kept by reference."""
    if blobs is None or not any(is_stub(m) for m in messages):
        return list(messages)
    refs = Refs(blobs, tenant, strict=True)
    try:
        expanded = await refs.expand(messages)
    except MemoryStoreError:
        return list(messages)
    out: list[Json] = []
    for message in expanded.forms:
        try:
            out.append(await refs.whole(message))
        except MemoryStoreError:
            out.append(message)
    return out


def run_stub(chunks: list[str], count: int) -> Json:
    """The stub of a stored run of ``count`` messages (a system message: what it says)."""
    note = (
        f"[{count} earlier messages of this conversation, kept by reference"
        f" ({len(chunks)} stored chunks): a front end reads them from the store]"
    )
    return {"role": "system", "content": note, "ref": {"chunks": chunks, "messages": count}}


def _stub(message: Json, digest: str, size: int) -> Json:
    content = str(message.get("content") or "")
    parts = message.get("parts")
    more = len(content) - HEAD_CHARS
    said = f"{more:,} more characters" if more > 0 else "the rest"
    if isinstance(parts, list) and parts:
        said += f" and {len(parts)} attachments"
    note = f"\n\n[{said} kept by reference ({size:,} bytes, sha256 {digest[:12]})]"
    kept = {k: v for k, v in message.items() if k not in ("content", "parts", "ref")}
    return {**kept, "content": content[:HEAD_CHARS] + note,
            "ref": {"sha256": digest, "size": size}}  # fmt: skip


def _gone_message(stub: Json) -> Json:
    """A message's stub whose content the store no longer keeps: its head and a note."""
    content = str(stub.get("content") or "")
    head, said, _ = content.rpartition("\n\n[")  # (the stub's own note goes)
    ref = stub["ref"]
    size, digest = ref.get("size"), str(ref.get("sha256"))
    size_said = f"{size:,} bytes, " if isinstance(size, int) else ""
    note = (f"\n\n[{GONE}: the rest of this message ({size_said}sha256 {digest[:12]}) was"
            " removed from the store after it went unused]")  # fmt: skip
    kept = {k: v for k, v in stub.items() if k not in ("content", "ref")}
    return {**kept, "content": (head if said else content) + note}


def _gone_run(stub: Json) -> Json:
    """A stored history the store no longer keeps whole: one user message that says so."""
    count = stub["ref"].get("messages")
    many = f"{count:,}" if isinstance(count, int) and count >= 0 else "the"
    note = (f"[{GONE}: {many} earlier messages of this conversation were removed from the"
            " store after they went unused]")  # fmt: skip
    return {"role": "user", "content": note}


def _cut(message: Json, size: int) -> Json:
    """``message`` cut to fit one blob, with a note of how much was dropped."""
    content = str(message.get("content") or "")
    keep = max(0, MAX_BLOB_BYTES // 8)  # (characters: JSON may escape each into 6 bytes)
    note = f"\n\n[cut: the content was {size:,} bytes, over the {MAX_BLOB_BYTES:,} kept]"
    kept = {k: v for k, v in message.items() if k != "parts"}
    return {**kept, "content": content[:keep] + note}


def _dumps(messages: list[Json]) -> bytes:
    return json.dumps(messages, separators=(",", ":")).encode()


def _chunk_names(message: Json) -> list[str]:
    ref = message["ref"]
    names = ref.get("chunks")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise BlobMissing("a history reference without its chunks")
    if len(names) > MAX_CHUNKS:  # (never made so: not ours)
        raise BlobMissing(f"a history reference of {len(names)} chunks, over {MAX_CHUNKS}")
    return [str(n) for n in names]


def _messages_of(data: bytes, *, one: bool = False) -> list[Json]:
    try:
        found = json.loads(data)
    except (ValueError, RecursionError):
        raise MemoryStoreError("stored messages are not JSON") from None
    ok = isinstance(found, list) and all(isinstance(m, dict) for m in found)
    if not ok or (one and len(found) != 1):
        raise MemoryStoreError("stored messages are not a list of messages")
    return found
