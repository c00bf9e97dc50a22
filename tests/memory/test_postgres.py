"""What only the PostgreSQL store has: its migrations table, the retry queue claimed with
SKIP LOCKED by several workers, conversation leases, and its one-line errors."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import pytest

from memory.backends import ready, write_inflight
from retinue.errors import MemoryStoreError
from retinue.memory import MemoryBackend, PostgresMemory
from retinue.memory.embeddings import Embedder
from retinue.messages import AssistantMessage, UserMessage
from retinue.store.pg_schema import SCHEMA_VERSION

SESSION = [UserMessage("Remember this."), AssistantMessage("Noted.")]


@pytest.fixture
def pg(new_store: Callable[..., MemoryBackend], backend: str) -> Callable[..., PostgresMemory]:
    if backend != "postgres":
        pytest.skip("PostgreSQL only")

    def build(**kwargs: object) -> PostgresMemory:
        store = new_store(**kwargs)
        assert isinstance(store, PostgresMemory)
        return store

    return build


async def test_migrations_are_recorded_and_a_newer_database_is_refused(
    pg: Callable[..., PostgresMemory],
) -> None:
    store = pg()
    async with store.connection() as conn:
        cur = await conn.execute("SELECT version FROM retinue_migrations ORDER BY version")
        assert [r[0] for r in await cur.fetchall()] == list(range(1, SCHEMA_VERSION + 1))
        await conn.execute("INSERT INTO retinue_migrations (version) VALUES (%s)", (99,))
    try:
        with pytest.raises(MemoryStoreError, match="newer than this Retinue"):
            await pg().blocks("t", "r")
    finally:
        async with store.connection() as conn:
            await conn.execute("DELETE FROM retinue_migrations WHERE version = 99")


async def test_two_workers_never_claim_the_same_transcript(
    pg: Callable[..., PostgresMemory],
) -> None:
    a, b = pg(), pg()
    for i in range(20):
        await write_inflight(
            a, run_id=f"r{i}", tenant="t", role="r", session_id=f"s{i}", model="m",
            messages=SESSION,
        )  # fmt: skip
    claims = await asyncio.gather(*(ready(w, stale_after=0) for w in (a, b, a, b)))
    ids = [item.run_id for claim in claims for item in claim]
    assert sorted(ids) == sorted(f"r{i}" for i in range(20))  # each once, none lost
    assert await ready(b, stale_after=0) == []  # claimed: leased to the first worker
    await a.pending.mark_failed(a.pending.root / "r3", "still failing")
    (again,) = await ready(b, stale_after=0)  # a failed one is free for anyone again
    assert again.run_id == "r3" and again.error == "still failing"
    assert again.messages == SESSION


async def test_a_lease_is_one_turn_at_a_time_and_expires_when_its_worker_dies(
    pg: Callable[..., PostgresMemory],
) -> None:
    leases = pg().conversations
    assert await leases.acquire("t", "c", "w1", "turn1", ttl=30) is None
    holder = await leases.acquire("t", "c", "w2", "turn2", ttl=30)
    assert holder is not None and holder.owner == "w1" and not holder.sticky
    assert await leases.acquire("u", "c", "w2", "turn2", ttl=30) is None  # other tenant
    assert await leases.renew("t", "c", "w1", "turn1", ttl=0.05)
    while await leases.acquire("t", "c", "w2", "turn2", ttl=30) is not None:
        await asyncio.sleep(0.02)  # w1 stopped renewing: its lease runs out
    assert not await leases.renew("t", "c", "w1", "turn1", ttl=30)  # lost, and it knows
    await leases.release("t", "c", "w2", "turn2", hold_for=60)  # keeps its sessions
    sticky = await leases.acquire("t", "c", "w1", "turn3", ttl=30)
    assert sticky is not None and sticky.owner == "w2" and sticky.sticky
    assert await leases.acquire("t", "c", "w2", "turn4", ttl=30) is None  # its own hold
    await leases.release("t", "c", "w2", "turn4")
    assert await leases.acquire("t", "c", "w1", "turn5", ttl=30) is None


async def test_nul_characters_are_stored_replaced(pg: Callable[..., PostgresMemory]) -> None:
    store = pg()
    await store.insert_passage("t", "r", "a\x00b passage")
    await store.set_block("t", "r", "human", "x\x00y")
    assert [p.content for p in await store.search("t", "r", "passage")] == ["a\ufffdb passage"]
    assert (await store.blocks("t", "r"))[1].value == "x\ufffdy"


class OneAxis(Embedder):
    async def embed(self, texts: list[str]) -> list[list[float]]:  # type: ignore[override]
        return [[1.0, float(len(t))] for t in texts]


async def test_without_pgvector_vector_search_says_so_once(
    pg: Callable[..., PostgresMemory], caplog: pytest.LogCaptureFixture
) -> None:
    store = pg(embedder=OneAxis())
    await store.insert_passage("t", "r", "some words")
    with caplog.at_level(logging.WARNING, "retinue.memory"):
        assert len(await store.search("t", "r", "words")) == 1
        assert len(await store.search("t", "r", "some")) == 1
    assert not store.pgvector
    notices = [r for r in caplog.records if "pgvector is not installed" in r.message]
    assert len(notices) == 1


async def test_an_unreachable_server_is_one_line_without_the_password() -> None:
    with socket_free_port() as port:
        store = PostgresMemory(f"postgresql://u:s3cret@127.0.0.1:{port}/db")
        with pytest.raises(MemoryStoreError) as err:
            await store.blocks("t", "r")
    message = str(err.value)
    assert "\n" not in message and "s3cret" not in message
    assert f"127.0.0.1:{port}/db" in message


class socket_free_port:
    """A port on 127.0.0.1 with nothing listening (bound, never listened on)."""

    def __enter__(self) -> int:
        import socket

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        return int(self.sock.getsockname()[1])

    def __exit__(self, *_: object) -> None:
        self.sock.close()
