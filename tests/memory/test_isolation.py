"""Tenants and roles never see each other's memory (a property over random scopes), in both
stores."""

import asyncio
import tempfile
from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory.backends import close, empty_database, make_store

names = st.text(
    alphabet=st.sampled_from("ab_%'\"*/ é中-"), min_size=1, max_size=6
)  # LIKE wildcards, quotes, FTS operators and non-ASCII: none may leak across scopes
scopes = st.tuples(names, st.sampled_from(["main", "coder", "coder ", "Coder", "%"]))


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(writes=st.lists(scopes, min_size=1, max_size=12))
def test_each_scope_sees_only_its_own_memory(
    writes: list[tuple[str, str]], backend: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue("pg_url") if backend == "postgres" else None
    asyncio.run(_check(writes, url))


async def _check(writes: list[tuple[str, str]], url: str | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        if url is not None:
            await empty_database(url)
        store = make_store(Path(tmp), url, block_limits={"notes": 100_000})
        mine: dict[tuple[str, str], list[str]] = defaultdict(list)
        for i, (tenant, role) in enumerate(writes):
            marker = f"marker{i}"
            await store.append_block(tenant, role, "notes", marker)
            await store.insert_passage(tenant, role, f"shared words {marker}")
            mine[(tenant, role)].append(marker)
        every = " ".join(f"marker{i}" for i in range(len(writes)))
        for (tenant, role), markers in mine.items():
            (notes,) = await store.blocks(tenant, role)
            assert notes.value.split("\n") == markers
            assert await store.passage_count(tenant, role) == len(markers)
            hits = await store.search(tenant, role, f"shared {every}", limit=100)
            assert sorted(h.content.split()[-1] for h in hits) == sorted(markers)
            assert "marker" not in (await store.render(tenant + "x", role)).replace(
                "archival_memory", ""
            )
        await close(store)
