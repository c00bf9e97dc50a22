"""The embedded model's worker process: a native crash fails one turn, never the agent.

Runs the real model (marked ``local_model``). The worker is killed from outside with the
signals a broken llama.cpp build dies of; the request must fail with one clear line naming
the signal, and the next request must start a fresh worker and answer.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from retinue.config import Settings
from retinue.errors import ModelError
from retinue.llm import _local_client
from retinue.llm.local import LocalModel, local_progress
from retinue.messages import UserMessage
from retinue.runtime import Runtime

pytest.importorskip("llama_cpp")
pytestmark = [pytest.mark.local_model, pytest.mark.timeout(600)]

LONG = [UserMessage("Count from 1 to 400, one number per line.")]


@pytest.fixture
def model(model_home: Path) -> LocalModel:
    # n_ctx differs from the other test modules: this module gets workers of its own to kill.
    return LocalModel(
        "qwen2.5-coder-0.5b", home=model_home, temperature=0.0, seed=7, n_ctx=4096, max_tokens=600
    )


async def _kill_when_generating(model: LocalModel, sig: signal.Signals) -> ModelError:
    started = asyncio.Event()
    task = asyncio.create_task(model.complete(LONG, on_text=lambda _t: started.set()))
    await asyncio.wait_for(started.wait(), timeout=300)
    pid = model.worker().pid
    assert pid is not None and pid != os.getpid()
    os.kill(pid, sig)
    with pytest.raises(ModelError) as info:
        await asyncio.wait_for(task, timeout=60)
    return info.value


@pytest.mark.parametrize("sig", [signal.SIGSEGV, signal.SIGILL, signal.SIGKILL])
async def test_a_worker_killed_mid_generation_fails_the_call_and_the_next_call_works(
    model: LocalModel, sig: signal.Signals
) -> None:
    error = await _kill_when_generating(model, sig)
    message = str(error)
    assert sig.name in message and "retinue doctor" in message
    assert "\n" not in message and "Traceback" not in message
    starts = model.worker().starts
    reply = await model.complete([UserMessage("Reply with exactly one word: yes")])
    assert reply.message.content
    assert model.worker().starts == starts + 1  # a fresh worker answered


async def test_cancel_stops_generation_in_the_worker_without_killing_it(
    model: LocalModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A loaded machine may take longer than the 2 s grace to reach the next token; what is
    # tested here is that the cancel stops generation, not how fast (no kill in between).
    monkeypatch.setattr(_local_client, "CANCEL_GRACE", 60.0)
    await model.load()
    worker = model.worker()
    pid = worker.pid
    seen: list[str] = []
    task = asyncio.create_task(model.complete(LONG, on_text=seen.append))
    while not seen:
        await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    reply = await asyncio.wait_for(
        model.complete([UserMessage("Reply with exactly one word: yes")]), timeout=120
    )
    assert reply.message.content
    assert worker.pid == pid  # the same process: the cancel stopped generation, no kill needed


async def test_progress_reports_prompt_processing_then_generation(model: LocalModel) -> None:
    events: list[dict[str, object]] = []
    token = local_progress.set(events.append)
    try:
        await model.complete([UserMessage("Reply with exactly one word: hi")])
    finally:
        local_progress.reset(token)
    stages = [e["progress"] for e in events]
    assert stages[:2] == ["prompt", "generating"] and set(stages[2:]) <= {"generating"}
    assert isinstance(events[0]["prompt_tokens"], int) and events[0]["prompt_tokens"] > 0


async def test_a_crashed_turn_leaves_the_conversation_usable(
    model: LocalModel, model_home: Path, tmp_path: Path
) -> None:
    settings = Settings.load(workspace=tmp_path, home=model_home)
    runtime = Runtime.create(settings, model=model, with_memory=False)
    conversation = runtime.conversation()
    started = asyncio.Event()
    token = local_progress.set(lambda e: started.set() if e["progress"] == "generating" else None)
    try:
        turn = asyncio.create_task(conversation.send("Count from 1 to 300, one per line."))
        await asyncio.wait_for(started.wait(), timeout=300)
    finally:
        local_progress.reset(token)
    pid = model.worker().pid
    assert pid is not None
    os.kill(pid, signal.SIGSEGV)
    with pytest.raises(ModelError, match="SIGSEGV"):
        await asyncio.wait_for(turn, timeout=60)
    out = await conversation.send("Reply with exactly one word: yes")
    assert out.content
