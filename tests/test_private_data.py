"""The data directory is the user's alone (issue 25, item 2): created 0700, its files 0600
(the memory database with its ``-wal`` and ``-shm`` files, which also hold the service's
conversations; kept transcripts; the server token), whatever the umask. ``retinue doctor``
warns about an existing directory other users can read (``tests/cli/test_doctor.py``)."""

from __future__ import annotations

import asyncio
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from retinue.errors import ModelError
from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.memory import ConsolidationOptions, open_memory
from retinue.messages import UserMessage
from retinue.server.security import ensure_token
from retinue.testing import ScriptedModel, call_tool

pytestmark = pytest.mark.timeout(60)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def open_to_others(home: Path) -> list[str]:
    """Every path under ``home`` (and itself) that a group or other user may reach."""
    paths = [home, *home.rglob("*")]
    return [f"{p} {mode(p):04o}" for p in paths if mode(p) & 0o077]


@pytest.fixture(autouse=True)
def permissive_umask() -> Iterator[None]:
    """The usual umask, under which new files are 0644 and folders 0755 unless chosen."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_the_memory_database_and_its_wal_and_shm_files_are_private(tmp_path: Path) -> None:
    home = tmp_path / "home"
    store = open_memory(home)
    try:
        asyncio.run(store.set_block("t", "coder", "human", "Prefers Rust"))
        files = {p.name: mode(p) for p in home.iterdir() if p.name.startswith("memory.db")}
    finally:
        store.close()
    assert files == {"memory.db": 0o600, "memory.db-wal": 0o600, "memory.db-shm": 0o600}
    assert mode(home) == 0o700


def test_kept_transcripts_are_private(tmp_path: Path) -> None:
    home = tmp_path / "home"
    store = open_memory(home, options=ConsolidationOptions(retry_delay=0))
    try:
        asyncio.run(
            store.consolidate(
                tenant="acme",
                role="coder",
                session_id="s1",
                messages=[UserMessage("my card number is 4242")],
                model=ScriptedModel([ModelError("down")] * 3),
            )
        )
    finally:
        store.close()
    kept = list((home / "pending").iterdir())
    assert kept and all(p.name.endswith(".failed.json") for p in kept)
    assert open_to_others(home) == []


def test_the_server_token_and_a_home_it_creates_are_private(tmp_path: Path) -> None:
    home = tmp_path / "fresh" / "home"
    token, created = ensure_token(home)
    assert created and token
    assert mode(home) == 0o700 and mode(home / "server-token") == 0o600


def test_an_existing_data_directory_keeps_its_mode(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o755)
    open_memory(home).close()
    assert mode(home) == 0o755  # the user's choice; `retinue doctor` warns about it
    assert mode(home / "memory.db") == 0o600


def test_retinue_run_leaves_nothing_in_the_data_directory_others_can_read(
    tmp_path: Path,
) -> None:
    memorize = call_tool("memorize", {"block_updates": [], "new_passages": ["config is TOML"]})
    model = ScriptedModel(
        [
            call_tool("SubAgent", {"task": "look", "role": "researcher", "interactive": True}),
            "Looked.",
            call_tool("TodoWrite", {"todos": [{"content": "a", "status": "pending"}]}),
            call_tool("UnloadSubAgent", {"role": "researcher"}),
            memorize,
            "Done.",
        ]
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RETINUE_"))}
    home = tmp_path / "home"
    with LoopbackOpenAIServer(model) as server:
        env |= {"RETINUE_HOME": str(home), "RETINUE_BLOCK_REAL_MODELS": "1"}
        env |= {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "test-key"}
        proc = subprocess.run(
            [sys.executable, "-m", "retinue", "run", "-m", "openai:test", "look around"],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=50,
            umask=0o022,
        )
    assert proc.returncode == 0, proc.stderr
    assert (home / "memory.db").exists()
    assert open_to_others(home) == []
