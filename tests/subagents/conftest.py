"""Fixtures for sub-agent tests (the building blocks live in ``subagent_kit``)."""

from pathlib import Path

import pytest
from subagent_kit import Kit, make_kit


@pytest.fixture
def kit(tmp_path: Path) -> Kit:
    return make_kit(tmp_path, "reviewer", "researcher", "tester")
