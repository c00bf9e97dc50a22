"""Workflow histories recorded by earlier code replay on today's: a change to
:class:`~retinue.temporal.workflow.ConversationWorkflow` that would break a conversation
already running on a Temporal server (a command added, removed or reordered, which Temporal
reports as nondeterminism) fails here, before it reaches a deployment.

The histories in ``histories/`` were recorded against the dev server with
``RETINUE_RECORD_HISTORIES=1 uv run pytest tests/temporal/test_temporal_replay.py``; the
scenario covers a tool call that waits for an approval, an interactive sub-agent session (a
child workflow), its unload and the conversation's close. Record anew only when a change is
meant to break running workflows (and say so in its release notes); otherwise keep the old
files and add new ones beside them (named by the date).
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

pytest.importorskip("temporalio", reason="the temporal extra (temporalio) is not installed")

from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from retinue.temporal.workflow import ConversationWorkflow

HISTORIES = Path(__file__).parent / "histories"
RECORD = os.environ.get("RETINUE_RECORD_HISTORIES") == "1"


def recorded() -> list[Path]:
    return sorted(HISTORIES.glob("*.json"))


def replayer() -> Replayer:
    runner = SandboxedWorkflowRunner(  # (as retinue.temporal.worker.make_worker's)
        restrictions=SandboxRestrictions.default.with_passthrough_modules("retinue")
    )
    return Replayer(workflows=[ConversationWorkflow], workflow_runner=runner)


def test_histories_are_recorded() -> None:
    names = [p.name for p in recorded()]
    assert any("conversation" in n for n in names) and any("session" in n for n in names)


def load(path: Path) -> WorkflowHistory:
    saved = json.loads(path.read_text(encoding="utf-8"))
    return WorkflowHistory.from_json(saved["workflow_id"], saved["history"])


@pytest.mark.parametrize("path", recorded(), ids=lambda p: p.stem)
async def test_a_recorded_history_replays_on_today_s_workflow(path: Path) -> None:
    result = await replayer().replay_workflow(load(path), raise_on_replay_failure=False)
    assert result.replay_failure is None, f"{path.name}: {result.replay_failure!r}"


@pytest.mark.skipif(not RECORD, reason="records the histories only when asked to")
@pytest.mark.timeout(300)
async def test_record_histories(temporal_address: str, tmp_path: Path) -> None:
    from test_temporal_tree import (  # (the same conftest folder)
        DEPLOYED,
        approvals_of,
        conversations,
        delegate,
        deploy,
        last_result,
        role,
        runtime_for,
    )

    from retinue.temporal.worker import make_worker
    from retinue.testing import ScriptedModel, call_tool

    DEPLOYED.clear()
    convs = await conversations(temporal_address)
    unload = call_tool("UnloadSubAgent", {"role": "helper"})
    main = ScriptedModel([call_tool("deploy", {"target": "prod"}), last_result,
                          delegate("helper", "say hello", interactive=True), last_result,
                          unload, last_result])  # fmt: skip
    helper = ScriptedModel(["hello"])
    runtime, _ = runtime_for(tmp_path, main, {"scripted:helper": helper},
                             roles=[role("helper")], tools=[deploy])  # fmt: skip
    async with make_worker(convs.client, runtime, convs.task_queue):
        await convs.start("replay-1")
        turn = asyncio.create_task(convs.send("replay-1", "deploy it"))
        pending = await approvals_of(convs, "replay-1")
        await convs.approve("replay-1", pending[0].id, allow=True)
        await turn
        await convs.send("replay-1", "ask the helper")
        [node] = (await convs.state("replay-1")).sessions
        await convs.send("replay-1", "end it")
        await convs.close("replay-1")
        await convs.handle("replay-1").result()
    main.assert_done()
    HISTORIES.mkdir(exist_ok=True)
    stamp = "2026-12-04"
    for kind, workflow_id in (("conversation", convs.handle("replay-1").id),
                              ("session", node.workflow_id)):  # fmt: skip
        history = await convs.client.get_workflow_handle(workflow_id).fetch_history()
        saved = {"workflow_id": workflow_id, "history": json.loads(history.to_json())}
        out = HISTORIES / f"{stamp}-{kind}.json"
        out.write_text(json.dumps(saved, indent=1) + "\n", encoding="utf-8")
