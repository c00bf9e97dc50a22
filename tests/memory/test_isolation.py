"""Tenants and roles never see each other's memory (a property over random scopes)."""

import asyncio
import tempfile
from collections import defaultdict
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retinue.memory import SQLiteMemory

names = st.text(
    alphabet=st.sampled_from("ab_%'\"*/ é中-"), min_size=1, max_size=6
)  # LIKE wildcards, quotes, FTS operators and non-ASCII: none may leak across scopes
scopes = st.tuples(names, st.sampled_from(["main", "coder", "coder ", "Coder", "%"]))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(writes=st.lists(scopes, min_size=1, max_size=12))
def test_each_scope_sees_only_its_own_memory(writes: list[tuple[str, str]]) -> None:
    asyncio.run(_check(writes))


async def _check(writes: list[tuple[str, str]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteMemory(Path(tmp) / "m.db", block_limits={"notes": 100_000})
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
        store.close()
