"""``retinue run`` as a real process for tests: a data directory with its ``config.toml``,
the model's provider pointed at a loopback server, real model APIs blocked."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

__all__ = ["retinue_run"]


def retinue_run(
    model: str, task: str, base_url: str, tmp_path: Path, config: str = ""
) -> subprocess.CompletedProcess[str]:
    """``retinue run -m model task`` in ``tmp_path``, ``<PROVIDER>_BASE_URL`` = ``base_url``."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text(config)
    provider = model.partition(":")[0].upper()
    env = {k: v for k, v in os.environ.items() if not k.startswith((f"{provider}_", "RETINUE_"))}
    env |= {"RETINUE_HOME": str(home), "RETINUE_BLOCK_REAL_MODELS": "1"}
    env |= {f"{provider}_BASE_URL": base_url, f"{provider}_API_KEY": "test-key"}
    return subprocess.run(
        [sys.executable, "-m", "retinue", "run", "-m", model, task],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
