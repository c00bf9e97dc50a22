"""End to end: spans exported over OTLP/HTTP (protobuf) to Arize Phoenix, a real OTLP
receiver, started by the test on 127.0.0.1; the trace is then read back from Phoenix's REST
API. Phoenix is large and no dependency of Retinue: ``.ci/run`` installs it in a venv of its
own (``.phoenix/``); ``RETINUE_PHOENIX`` may name another ``phoenix`` executable. Without
one the test skips."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from subagent_kit import echo, make_kit  # pyright: ignore[reportMissingImports]

from retinue.engine import RunConfig
from retinue.engine.session import Session
from retinue.messages import SystemMessage
from retinue.subagents import subagent_tools
from retinue.telemetry import trace as tel
from retinue.testing import ScriptedModel, call_tool
from retinue.tools import ToolRegistry

pytestmark = pytest.mark.timeout(420)

ROOT = Path(__file__).resolve().parents[2]


def phoenix_executable() -> str | None:
    given = os.environ.get("RETINUE_PHOENIX")
    if given:
        return given
    local = ROOT / ".phoenix" / "bin" / "phoenix"
    return str(local) if local.exists() else shutil.which("phoenix")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


@pytest.fixture
def phoenix(tmp_path: Path) -> Iterator[str]:
    exe = phoenix_executable()
    if exe is None:
        pytest.skip("Arize Phoenix is not installed (.ci/run installs it in .phoenix/)")
    port = free_port()
    env = {
        **os.environ,
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(free_port()),
        "PHOENIX_WORKING_DIR": str(tmp_path / "phoenix"),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    log = (tmp_path / "phoenix.log").open("wb")
    proc = subprocess.Popen([exe, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 360  # its migrations take a while on a loaded machine
        while True:
            if proc.poll() is not None:
                pytest.fail(f"phoenix exited: {(tmp_path / 'phoenix.log').read_text()[-2000:]}")
            try:
                urllib.request.urlopen(f"{base}/healthz", timeout=2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail("phoenix did not start in 360 s")
                time.sleep(1)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def test_a_nested_run_is_exported_over_otlp_and_found_in_phoenix(
    phoenix: str, tmp_path: Path
) -> None:
    assert tel.setup(phoenix)  # Retinue's otel_endpoint: the base URL, /v1/traces added
    try:
        asyncio.run(nested_run(tmp_path))
    finally:
        tel.disable()  # flushes the batch processor
    spans: list[dict[str, Any]] = []
    for _ in range(60):  # Phoenix writes what it received in the background
        spans = get(f"{phoenix}/v1/projects/default/spans?limit=100")["data"]
        if len(spans) >= 6:
            break
        time.sleep(0.5)
    by_name = {s["name"]: s for s in spans}
    assert {"invoke_agent main", "execute_tool SubAgent", "invoke_agent reviewer"} <= set(
        by_name
    ), sorted(by_name)
    assert len({s["context"]["trace_id"] for s in spans}) == 1
    main, tool, child = (
        by_name[n] for n in ("invoke_agent main", "execute_tool SubAgent", "invoke_agent reviewer")
    )
    assert main["parent_id"] is None
    assert tool["parent_id"] == main["context"]["span_id"]
    assert child["parent_id"] == tool["context"]["span_id"]
    assert child["attributes"]["gen_ai.agent.name"] == "reviewer"
    assert child["attributes"]["gen_ai.conversation.id"] == "main/reviewer"
    chat = by_name["chat reviewer"]
    assert chat["parent_id"] == child["context"]["span_id"]
    assert chat["attributes"]["gen_ai.usage.output_tokens"] > 0


async def nested_run(tmp_path: Path) -> None:
    kit = make_kit(tmp_path / "ws", "reviewer")
    (tmp_path / "ws").mkdir()
    kit.models["reviewer"].add("looks fine")
    main = ScriptedModel(
        [
            call_tool("SubAgent", {"task": "review", "role": "reviewer", "interactive": True}),
            "done",
        ],
        name="scripted:main",
    )
    tools = ToolRegistry([echo, *subagent_tools()])
    config = RunConfig(main, [SystemMessage("main")], tools, kit.ctx("main"))
    async with kit.manager.owner("main"):
        out = await Session("main", config).send("go")
    assert out.content == "done"
