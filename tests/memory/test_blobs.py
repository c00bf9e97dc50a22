"""The blob store (content kept by reference for Temporal's payloads) on both stores:
content-addressed, per tenant, written once however often it is put, checked when read."""

from __future__ import annotations

import uuid

import pytest

from retinue.errors import MemoryStoreError
from retinue.memory import MemoryBackend
from retinue.store import blobs as blob_module
from retinue.store.blobs import BlobMissing, BlobStore, digest_of


def blobs_of(store: MemoryBackend) -> BlobStore:
    found = getattr(store, "blobs", None)
    assert found is not None, f"{type(store).__name__} keeps no blobs"
    return found


async def test_a_blob_reads_back_under_its_tenant_only(store: MemoryBackend) -> None:
    blobs, data = blobs_of(store), f"a large tool result {uuid.uuid4()}".encode() * 1_000
    digest = await blobs.put("acme", data)
    assert digest == digest_of(data)
    assert await blobs.put("acme", data) == digest  # (an activity tried again: one row)
    assert await blobs.get("acme", digest) == data
    with pytest.raises(BlobMissing):
        await blobs.get("other", digest)  # another tenant's reference reads nothing
    with pytest.raises(BlobMissing):
        await blobs.get("acme", digest_of(b"never written"))


async def test_a_reference_that_is_not_a_digest_is_refused(store: MemoryBackend) -> None:
    for odd in ("", "../x", "A" * 64, "0" * 63, "0" * 64 + "'; DROP TABLE blobs; --"):
        with pytest.raises(BlobMissing):
            await blobs_of(store).get("acme", odd)


async def test_content_over_the_limit_is_refused_not_stored(
    store: MemoryBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(blob_module, "MAX_BLOB_BYTES", 1_000)
    blobs, data = blobs_of(store), b"x" * 1_001
    with pytest.raises(MemoryStoreError, match="over 1,000"):
        await blobs.put("acme", data)
    with pytest.raises(BlobMissing):
        await blobs.get("acme", digest_of(data))
