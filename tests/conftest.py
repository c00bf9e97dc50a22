"""Test-session setup: real model requests are forbidden (loopback servers only), and no test
touches the user's data directory: ``RETINUE_HOME`` is a temporary folder, one for the
session's shared fixtures and a fresh one for each test (a test that sets its own wins)."""

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ["RETINUE_BLOCK_REAL_MODELS"] = "1"
os.environ.pop("OPENAI_API_KEY", None)
os.environ.pop("ANTHROPIC_API_KEY", None)
os.environ.pop("GEMINI_API_KEY", None)  # a Google key also picks the default model
os.environ.pop("GOOGLE_API_KEY", None)


@pytest.fixture(scope="session", autouse=True)
def _session_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("retinue-home-session")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RETINUE_HOME", str(home))
        yield home


@pytest.fixture(autouse=True)
def _test_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path_factory.mktemp("retinue-home")
    monkeypatch.setenv("RETINUE_HOME", str(home))
    return home
