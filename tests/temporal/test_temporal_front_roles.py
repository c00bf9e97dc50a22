"""The ``retinue/<role>`` models of ``retinue serve --temporal``'s OpenAI-compatible endpoint,
over real HTTP (uvicorn on 127.0.0.1) against a real dev server and an in-process worker: a
request talks to the role as one one-shot run (as in-process), whole or streamed, its
``initialPrompt`` first, in a conversation of its own that ends with the run, its memory
consolidated once; a role the workers do not know is 404 before any run starts, as
in-process. While it runs, the run is a session of the tenant (``GET /v1/sessions``,
``retinue sessions``: its tokens, its scripted model's cost unknown), and interrupting it ends
it. A front end killed mid-run leaves nothing open: the conversation's workflow closes
itself with the run."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

pytest.importorskip("temporalio", reason="the temporal extra (temporalio) is not installed")

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowUpdateFailedError
from test_temporal_session_routes import (
    TOKEN,  # (the one its ``retinue`` sends)
    lines,
    ok,
    retinue,
    role,
    serving,
    stuck_tool,
    until,
)
from test_temporal_tree import Remembered

from retinue.config import Settings
from retinue.runtime import Runtime
from retinue.server.security import Security
from retinue.server.temporal_front import TemporalFront, create_temporal_app
from retinue.temporal._types import Limits
from retinue.temporal.client import TemporalConversations
from retinue.temporal.worker import make_worker
from retinue.temporal.workflow import INTERRUPTED_NOTE
from retinue.testing import ScriptedModel, call_tool
from retinue.tools.base import Tool, tool

pytestmark = pytest.mark.timeout(180)  # a hang bound, the dev server's start included

CHAT = "/v1/chat/completions"
RUN = re.compile(r"oai-[0-9a-f]{32}/helper#1")  # a role run's agent id: its conversation's
PLAN = "Plan first."  # the helper role's initialPrompt


@tool
async def jot(text: str) -> str:
    """Note ``text``."""
    return f"noted {text}"


@asynccontextmanager
async def stack(
    address: str, tmp_path: Path, helper: ScriptedModel, *tools: Tool
) -> AsyncIterator[tuple[httpx.AsyncClient, TemporalFront, Remembered]]:
    """A worker whose runtime knows the ``helper`` role (``initialPrompt``: ``PLAN``; it may ask;
    and ``jot``, ``stuck``, ``tools``), and the front end over HTTP; its client, the front
    end and the memory consolidations reach."""
    settings = Settings(home=tmp_path / "home", workspace=tmp_path)
    main = ScriptedModel([])  # (the main agent of a role run's conversation takes no turn)
    runtime = Runtime.create(
        settings, model=main, model_for={"scripted:helper": helper}.__getitem__,
        roles=[replace(role("helper", "ask_parent"), initial_prompt=PLAN)],
        extra_tools=[jot, stuck_tool(tmp_path / "log.txt"), *tools],
        with_memory=False, builtins=False,
    )  # fmt: skip
    memory = Remembered()
    runtime.manager.factory.memory = memory  # (what a session's close consolidates into)
    client = await Client.connect(address)
    front = TemporalFront(client, task_queue=f"test-{uuid.uuid4().hex}")
    app = create_temporal_app(front, Security.build(TOKEN))
    async with (
        make_worker(client, runtime, front.task_queue),
        serving(app) as url,
        httpx.AsyncClient(base_url=url, timeout=60,
                          headers={"Authorization": f"Bearer {TOKEN}"}) as http,
    ):  # fmt: skip
        yield http, front, memory
    main.assert_done()


def chat(model: str, text: str, system: str = "", *, stream: bool = False) -> dict[str, Any]:
    said = [{"role": "system", "content": system}] if system else []
    return {"model": model, "messages": [*said, {"role": "user", "content": text}],
            "stream": stream}  # fmt: skip


def chunks(body: str) -> list[dict[str, Any]]:
    data = [line.removeprefix("data: ") for line in body.splitlines() if line.startswith("data: ")]
    assert data[-1] == "[DONE]", body[-500:]
    return [json.loads(d) for d in data[:-1]]


async def closed(front: TemporalFront, agent_id: str) -> bool:
    """Whether the run ``agent_id`` (``CID/role#1``) and its conversation's workflow ended."""
    cid = agent_id.partition("/")[0]
    ids = [f"retinue/default/{cid}", f"retinue/default/{agent_id}"]
    described = [await front.client.get_workflow_handle(i).describe() for i in ids]
    return all(d.status == WorkflowExecutionStatus.COMPLETED for d in described)


async def nothing_runs(front: TemporalFront) -> bool:
    """Whether no workflow of the front end's task queue runs (as visibility says, late)."""
    query = f"TaskQueue = '{front.task_queue}' AND ExecutionStatus = 'Running'"
    return not [w async for w in front.client.list_workflows(query)]


async def started(front: TemporalFront) -> list[str]:
    """The ids of the workflows started on the front end's task queue (as visibility says,
    late)."""
    query = f"TaskQueue = '{front.task_queue}'"
    return [w.id async for w in front.client.list_workflows(query)]


async def counted(front: TemporalFront, count: int) -> bool:
    return len(await started(front)) >= count


async def test_a_role_model_is_a_one_shot_run_that_ends_consolidated(
    temporal_address: str, tmp_path: Path
) -> None:
    helper = ScriptedModel([call_tool("jot", {"text": "up"}), "all is well",
                            "streamed: all is well"])  # fmt: skip
    async with stack(temporal_address, tmp_path, helper) as (http, front, memory):
        whole = await http.post(CHAT, json=chat("retinue/helper", "What is up?", "Be brief."))
        streamed = await http.post(CHAT, json=chat("retinue/helper", "And now?", stream=True))
        await until(lambda: len(memory.consolidated) == 2)
        runs = [session for _, session in memory.consolidated]
        for run in runs:
            await until(lambda run=run: closed(front, run))
        unknown = await http.post(CHAT, json=chat("retinue/nobody", "Hi"))
        misnamed = [
            await http.post(CHAT, json=chat(name, "Hi"))
            for name in ("retinue/../helper", "gpt-4o", f"retinue/{'x' * 100}")
        ]
        listed = ok(await http.get("/v1/models"))
        await until(lambda: nothing_runs(front))  # the unknown role's conversation ended too
        await until(lambda: counted(front, 5))  # two runs, three conversations
        ids = await started(front)

    answer = ok(whole)
    assert answer["choices"][0]["message"]["content"] == "all is well"
    assert answer["choices"][0]["finish_reason"] == "stop"
    assert answer["usage"]["completion_tokens"] > 0  # (the run's two model calls)
    extra = answer["retinue"]
    assert extra == {"conversation": None, "stop_reason": "final", "tools_used": ["jot"]}
    assert "x-retinue-conversation" not in whole.headers  # no conversation is kept
    task = helper.calls[0].messages[-1].content  # the transcript and the last message
    assert isinstance(task, str) and task.startswith(f"{PLAN}\n\n")  # its initialPrompt first
    assert "Be brief." in task and task.endswith("What is up?")
    assert helper.calls[1].messages[-1].content == "noted up"  # its tool ran

    assert streamed.status_code == 200, streamed.text
    parts = chunks(streamed.text)
    said = "".join(c["choices"][0]["delta"].get("content", "") for c in parts if c["choices"])
    assert said == "streamed: all is well"
    assert parts[-1]["choices"][0]["finish_reason"] == "stop"
    assert helper.calls[2].messages[-1].content == f"{PLAN}\n\nAnd now?"  # (no transcript)

    # each run consolidated once, as a one-shot session of its own conversation
    assert [role for role, _ in memory.consolidated] == ["helper", "helper"]
    assert all(RUN.fullmatch(run) for run in runs) and runs[0] != runs[1]

    assert unknown.status_code == 404  # the workers know no such role: as in-process
    assert "unknown role 'nobody'" in unknown.json()["error"]["message"]
    assert not [i for i in ids if "nobody" in i]  # its run never started: no model was asked
    assert [r.status_code for r in misnamed] == [404, 404, 404]
    assert all(r.json()["error"]["message"].startswith("model ") for r in misnamed)
    assert [m["id"] for m in listed["data"]] == ["retinue"]  # (the roles are the workers')
    assert len(memory.consolidated) == 2  # the unknown role's run had nothing to consolidate
    helper.assert_done()


async def test_a_role_run_is_a_session_listed_and_interrupted(
    temporal_address: str, tmp_path: Path
) -> None:
    log = tmp_path / "log.txt"
    helper = ScriptedModel([call_tool("stuck", {})])
    async with stack(temporal_address, tmp_path, helper) as (http, front, memory):
        turn = asyncio.create_task(http.post(CHAT,
                                             json=chat("retinue/helper", "Wait.")))  # fmt: skip
        await until(lambda: "started" in lines(log))  # the run's long call runs
        [session] = ok(await http.get("/v1/sessions"))["sessions"]
        table = await retinue(["sessions"], http, tmp_path / "cli")  # what `retinue sessions` shows
        interrupted = ok(await http.post(f"/v1/sessions/{quote(session['id'])}/interrupt"))
        reply = ok(await turn)
        await until(lambda: len(memory.consolidated) == 1)
        run = memory.consolidated[0][1]
        await until(lambda: closed(front, run))
        after = ok(await http.get("/v1/sessions"))["sessions"]

    assert session["id"] == f"conv-{run}" and RUN.fullmatch(run)
    shown = {"parent_id": f"conv-{run.partition('/')[0]}", "role": "helper", "kind": "one-shot",
             "state": "running", "cost_usd": None}  # fmt: skip
    assert {k: session[k] for k in shown} == shown and session["tokens"] > 0
    row = next(line for line in table.splitlines() if "helper" in line)
    assert "unknown" in row and "cost unknown" in row and "None" not in table
    assert interrupted == {"id": session["id"], "interrupted": True}
    assert reply["choices"][0]["message"]["content"] == INTERRUPTED_NOTE
    assert reply["retinue"]["stop_reason"] == "interrupted"
    assert lines(log) == ["started", "cancelled"]
    assert after == []  # the run ended with its turn
    assert memory.consolidated == [("helper", run)]
    helper.assert_done()


def gated_tool(log: Path, gate: asyncio.Event) -> Tool:
    """``gated`` writes ``started``, then answers once ``gate`` is set."""

    @tool
    async def gated() -> str:
        """Start, then wait for the gate."""
        with log.open("a") as f:
            f.write("started\n")
        await gate.wait()
        return "through"

    return gated


FRONT_END = """
import asyncio, sys
from temporalio.client import Client
from retinue.server.temporal_front import TemporalFront

async def main() -> None:
    front = TemporalFront(await Client.connect(sys.argv[1]), task_queue=sys.argv[2])
    await front.start("default", sys.argv[3], "Wait for it.", role="helper")

asyncio.run(main())
"""


async def test_a_front_end_killed_mid_run_leaves_no_conversation_open(
    temporal_address: str, tmp_path: Path
) -> None:
    log, gate = tmp_path / "gate.txt", asyncio.Event()
    helper = ScriptedModel([call_tool("gated", {}), "through it"])
    cid = f"oai-{uuid.uuid4().hex}"
    gated = gated_tool(log, gate)
    async with stack(temporal_address, tmp_path, helper, gated) as (_, front, memory):
        front_end = await asyncio.create_subprocess_exec(
            sys.executable, "-c", FRONT_END, temporal_address, front.task_queue, cid
        )
        try:
            await until(lambda: "started" in lines(log) or front_end.returncode is not None)
            assert front_end.returncode is None, "the front end ended before the run ran"
        finally:
            front_end.send_signal(signal.SIGKILL)  # (mid-run: nothing of it may close anything)
            await front_end.wait()
        gate.set()
        await until(lambda: len(memory.consolidated) == 1)
        run = f"{cid}/helper#1"
        await until(lambda: closed(front, run))
        await until(lambda: nothing_runs(front))

    assert memory.consolidated == [("helper", run)]  # once, by the workflow's own close
    assert helper.calls[0].messages[-1].content == f"{PLAN}\n\nWait for it."
    assert helper.calls[1].messages[-1].content == "through"  # the run went on, and ended
    helper.assert_done()


async def refusal(update: Any) -> str:
    """Why a ``run_role`` Update failed (its handle's result)."""
    with pytest.raises(WorkflowUpdateFailedError) as failed:
        await update.result()
    return str(getattr(failed.value.cause, "message", failed.value.cause))


async def test_a_run_that_asks_or_is_refused_still_ends_its_conversation(
    temporal_address: str, tmp_path: Path
) -> None:
    log, gate = tmp_path / "gate.txt", asyncio.Event()
    helper = ScriptedModel([call_tool("AskParent", {"question": "Which one?"}),
                            call_tool("gated", {}), "through it"])  # fmt: skip
    cids = [f"oai-{uuid.uuid4().hex}" for _ in range(3)]
    gated = gated_tool(log, gate)
    async with stack(temporal_address, tmp_path, helper, gated) as (_, front, memory):
        convs = TemporalConversations(front.client, task_queue=front.task_queue,
                                      limits=Limits(max_message_chars=100))  # fmt: skip
        asked = await (await convs.start_role_run(cids[0], "helper", "Pick one.")).result()
        too_long = await refusal(await convs.start_role_run(cids[1], "helper", "x" * 101))
        running = await convs.start_role_run(cids[2], "helper", "Wait for it.")
        await until(lambda: "started" in lines(log))
        again = await refusal(await convs.start_role_run(cids[2], "helper", "Again."))
        gate.set()
        through = await running.result()
        await until(lambda: len(memory.consolidated) == 2)
        for cid in cids:
            await until(lambda cid=cid: closed_conversation(front, cid))
        await until(lambda: nothing_runs(front))

    # a run that asked is ended with its conversation, consolidated once (as in-process)
    assert (asked.content, asked.stop_reason) == ("Which one?", "asking")
    assert "the message is over 100 chars" in too_long  # (refused in the run: then closed)
    assert "a role runs once, in a new conversation of its own" in again  # (refused: not run)
    assert (through.content, through.stop_reason) == ("through it", "final")
    assert memory.consolidated == [("helper", f"{cids[0]}/helper#1"),
                                   ("helper", f"{cids[2]}/helper#1")]  # fmt: skip
    helper.assert_done()


async def closed_conversation(front: TemporalFront, cid: str) -> bool:
    described = await front.client.get_workflow_handle(f"retinue/default/{cid}").describe()
    return described.status == WorkflowExecutionStatus.COMPLETED
