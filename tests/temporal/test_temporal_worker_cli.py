"""``retinue worker --temporal`` as real processes: one is killed (SIGKILL) mid-turn, the next
one finishes the turn, and the call that was running when it died is not run twice."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("temporalio", reason="the temporal extra (temporalio) is not installed")

from temporalio.client import Client, WorkflowUpdateStage
from temporalio.service import RPCError

from retinue.durable.revive import RESTARTED_RESULT
from retinue.llm.base import ToolSpec
from retinue.llm.loopback import LoopbackOpenAIServer
from retinue.messages import Message, ToolResultMessage
from retinue.temporal._types import Limits
from retinue.temporal.client import TemporalConversations
from retinue.testing import ScriptedModel, call_tool

pytestmark = pytest.mark.timeout(300)  # a hang bound, the dev server's start included

ACCEPTED = WorkflowUpdateStage.ACCEPTED


def start_worker(
    address: str, queue: str, server: LoopbackOpenAIServer, tmp_path: Path
) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RETINUE_"))}
    env.update(RETINUE_HOME=str(tmp_path / "home"), RETINUE_BLOCK_REAL_MODELS="1",
               OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="test-key")  # fmt: skip
    args = [sys.executable, "-m", "retinue", "worker", "--temporal", address,
            "--task-queue", queue, "--model", "openai:test",
            "--permission-mode", "bypassPermissions", "-q"]  # fmt: skip
    return subprocess.Popen(
        args, env=env, cwd=tmp_path, start_new_session=True,  # its own group: its shells too
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip


def kill(worker: subprocess.Popen[bytes]) -> None:
    os.killpg(worker.pid, signal.SIGKILL)
    worker.wait()


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def told_cut_short(messages: Sequence[Message], _tools: Sequence[ToolSpec]) -> str:
    result = messages[-1]
    assert isinstance(result, ToolResultMessage) and result.content == RESTARTED_RESULT
    return "The payment may have gone out: check before paying again."


async def test_a_killed_worker_s_turn_finishes_on_another_without_a_second_call(
    temporal_address: str, tmp_path: Path
) -> None:
    paid = tmp_path / "paid.txt"
    queue = f"cli-{uuid.uuid4().hex}"
    model = ScriptedModel(
        [call_tool("Bash", {"command": f"echo paid >> {paid} && sleep 30"}), told_cut_short]
    )
    client = await Client.connect(temporal_address)
    convs = TemporalConversations(client, task_queue=queue, limits=replace(Limits(), heartbeat_s=2))
    with LoopbackOpenAIServer(model) as server:
        first = start_worker(temporal_address, queue, server, tmp_path)
        try:
            handle = await convs.start("bill")
            deadline = time.monotonic() + 120
            while True:  # until the worker polls (it takes a moment to start)
                try:
                    turn = await handle.start_update(
                        "send",
                        "pay the bill",
                        wait_for_stage=WorkflowUpdateStage.ACCEPTED,
                        result_type=dict,
                    )
                    break
                except RPCError:
                    assert first.poll() is None, first.stderr.read() if first.stderr else b""
                    assert time.monotonic() < deadline, "the first worker never polled"
                    await asyncio.sleep(0.2)
            while not lines(paid):  # the call ran on the first worker
                assert first.poll() is None, first.stderr.read() if first.stderr else b""
                assert time.monotonic() < deadline, "the first worker never ran the call"
                await asyncio.sleep(0.05)
            kill(first)
            second = start_worker(temporal_address, queue, server, tmp_path)
            try:
                reply = await turn.result()
                history = await convs.history("bill")  # (a query needs a worker)
            finally:
                kill(second)
        finally:
            if first.poll() is None:
                kill(first)
    assert reply["content"] == "The payment may have gone out: check before paying again."
    assert lines(paid) == ["paid"]  # once, not twice
    results = [m for m in history if isinstance(m, ToolResultMessage)]
    assert [(r.content, r.is_error) for r in results] == [(RESTARTED_RESULT, True)]
    model.assert_done()


def test_a_worker_without_a_server_says_so_in_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "RETINUE_"))}
    env.update(RETINUE_HOME=str(tmp_path / "home"), OPENAI_API_KEY="test-key")
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        nobody = f"127.0.0.1:{s.getsockname()[1]}"
    proc = subprocess.run(
        [sys.executable, "-m", "retinue", "worker", "--temporal", nobody, "--model", "openai:test",
         "-q"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=50,
    )  # fmt: skip
    assert proc.returncode == 1
    assert f"cannot reach the Temporal server at '{nobody}'" in proc.stderr
    assert "Traceback" not in proc.stderr
