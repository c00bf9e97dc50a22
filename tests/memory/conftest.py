"""Every memory test runs against both stores: SQLite in a temporary folder, and PostgreSQL
on a real server started once for the test session (``tests/pgserver.py``), its tables
emptied before each test. Consolidation retries without delays."""

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memory.backends import close, empty_database, make_store, start_pg_server
from retinue.memory import ConsolidationOptions, MemoryBackend, SQLiteMemory, open_memory


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A migrated database on a PostgreSQL server of this test session."""
    server, url = start_pg_server()
    yield url
    server.stop()


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
async def new_store(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[Callable[..., MemoryBackend]]:
    """Build stores of this test's backend (all on one empty database or folder)."""
    url = request.getfixturevalue("pg_url") if backend == "postgres" else None
    if url is not None:
        await empty_database(url)
    made: list[MemoryBackend] = []

    def build(**kwargs: Any) -> MemoryBackend:
        made.append(make_store(tmp_path, url, **kwargs))
        return made[-1]

    yield build
    for store in made:
        await close(store)


@pytest.fixture
def store(new_store: Callable[..., MemoryBackend]) -> MemoryBackend:
    return new_store(options=ConsolidationOptions(retry_delay=0.0))


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[SQLiteMemory]:
    """The SQLite store alone, for tests of what only it has (files, ``pending/``)."""
    s = open_memory(tmp_path, options=ConsolidationOptions(retry_delay=0.0))
    yield s
    s.close()
