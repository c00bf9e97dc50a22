"""A workspace whose ``.mcp.json`` names the test's echo server and the published time server,
approved in the data directory ``<tmp>/home``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from mcp_kit import echo_def, trust_all

from retinue.config import Settings


@pytest.fixture
def marks(tmp_path: Path) -> Path:
    """Where the echo server leaves its marks: in the workspace, since a server runs in
    the sandbox (the rest of the filesystem is read-only there, ``/tmp`` its own)."""
    path = tmp_path / "ws" / "marks"
    path.mkdir(parents=True)
    return path


@pytest.fixture
def workspace(tmp_path: Path, marks: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    servers = {
        "echo": echo_def(marks),
        "time": {"command": sys.executable, "args": ["-m", "mcp_server_time"]},
    }
    (ws / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))
    trust_all(tmp_path / "home", ws)  # as the user would, once (see tests/policy for trust)
    return ws


@pytest.fixture
def settings(tmp_path: Path, workspace: Path) -> Settings:
    return Settings.load(home=tmp_path / "home", workspace=workspace, model="scripted:model")
