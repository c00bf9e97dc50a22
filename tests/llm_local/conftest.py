"""The data directory the real-model tests share, so the model file is assembled once."""

from __future__ import annotations

from pathlib import Path

import pytest

from retinue.errors import ConfigError
from retinue.llm._gguf import MODELS, part_paths


@pytest.fixture(scope="session")
def model_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        part_paths(MODELS["qwen2.5-coder-0.5b"])
    except ConfigError:
        pytest.skip("the embedded model's part packages are not installed")
    return tmp_path_factory.mktemp("retinue-home")
