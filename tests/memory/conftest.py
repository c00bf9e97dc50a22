"""A fresh store per test, retrying consolidation without delays."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from retinue.memory import ConsolidationOptions, SQLiteMemory, open_memory


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteMemory]:
    s = open_memory(tmp_path, options=ConsolidationOptions(retry_delay=0.0))
    yield s
    s.close()
