"""Archival passages: BM25 ranking, query safety, duplicates, hybrid search."""

import itertools
from collections.abc import Callable, Sequence

from retinue.errors import ModelError
from retinue.memory import MemoryBackend


async def test_bm25_ranks_the_most_relevant_passage_first(store: MemoryBackend) -> None:
    texts = [
        "The office coffee machine was repaired on Tuesday",
        "Postgres replication lag spiked after the failover",
        "Replication of the Postgres cluster is configured in ops/pg.yml",
        "Postgres replication lag is monitored; alert when lag exceeds 30s",
        "Lunch options near the office",
    ]
    for t in texts:
        await store.insert_passage("t", "dba", t)
    hits = await store.search("t", "dba", "postgres replication lag", limit=5)
    assert [h.content for h in hits[:2]] == [texts[3], texts[1]]
    assert {h.content for h in hits} == set(texts[1:4])
    assert all(a.score >= b.score for a, b in itertools.pairwise(hits))


async def test_rare_term_outranks_common_term(store: MemoryBackend) -> None:
    for i in range(20):
        await store.insert_passage("t", "r", f"deploy note number {i} about the server")
    await store.insert_passage("t", "r", "the kubelet crashed")
    hits = await store.search("t", "r", "server kubelet", limit=3)
    assert hits[0].content == "the kubelet crashed"


async def test_search_limit_and_syntax_safety(store: MemoryBackend) -> None:
    for i in range(10):
        await store.insert_passage("t", "r", f"alpha passage {i}")
    assert len(await store.search("t", "r", "alpha", limit=3)) == 3
    for nasty in ['what\'s "AND" OR (x*', "NEAR(", "-", "   "]:
        await store.search("t", "r", nasty)  # must not raise an FTS syntax error
    assert await store.search("t", "r", "   ") == []


async def test_duplicates_are_skipped(store: MemoryBackend) -> None:
    assert await store.insert_passage("t", "r", "Ann likes green tea") is not None
    assert await store.insert_passage("t", "r", "ann likes GREEN tea!") is None
    assert await store.insert_passage("t", "r", "Ann dislikes green tea") is not None
    assert await store.passage_count("t", "r") == 2


class KeywordEmbedder:
    """A deterministic embedder: one axis per concept, so similarity is predictable."""

    concepts = ({"cat", "feline", "kitten"}, {"car", "engine"}, {"weather", "rain"})

    def __init__(self) -> None:
        self.fail = False

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if self.fail:
            raise ModelError("embedding endpoint down")
        out = []
        for t in texts:
            words = set(t.lower().replace(".", " ").split())
            out.append([float(len(words & c)) for c in self.concepts] + [0.01])
        return out


async def test_hybrid_search_finds_passages_without_shared_words(
    new_store: Callable[..., MemoryBackend],
) -> None:
    embedder = KeywordEmbedder()
    s = new_store(embedder=embedder)
    await s.insert_passage("t", "r", "The feline sleeps on the mat.")
    await s.insert_passage("t", "r", "The engine needs oil.")
    await s.insert_passage("t", "r", "Rain expected tomorrow.")
    hits = await s.search("t", "r", "kitten", limit=1)
    assert [h.content for h in hits] == ["The feline sleeps on the mat."]
    embedder.fail = True  # a failing endpoint degrades to full-text search
    assert [h.content for h in await s.search("t", "r", "engine", limit=1)] == [
        "The engine needs oil."
    ]
    assert await s.search("t", "r", "kitten", limit=1) == []
